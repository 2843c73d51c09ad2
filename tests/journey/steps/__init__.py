"""Small pure models of each component a tenant's pod meets on its way to a node.

Every step is a function `(host_pod, fleet) -> StepResult`: `ok` False is a refusal, and `reason` is
what the tenant would see (the admission message, the Kueue/KAI condition). `pod` is the host pod as
the step leaves it (mutations applied). Each module's docstring names the upstream file and tag it
models; the models state facts about that behaviour, they are not ports of upstream code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepResult:
    ok: bool
    reason: str
    pod: dict[str, Any]
    # What the step decided, for assertions: e.g. {"flavor": "h100-3g", "cluster_queue": "tenant-beta"}.
    facts: dict[str, Any] = field(default_factory=dict)


Step = Callable[[dict[str, Any], Any], StepResult]


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"].get("containers", [])]


def requests_of(pod: dict[str, Any]) -> dict[str, float]:
    """Effective requests of a pod (Kubernetes' rule: max of any init container and the sum of the
    app containers, per resource), as numbers (cpu in cores, memory in bytes)."""
    total: dict[str, float] = {}
    for c in pod["spec"].get("containers", []):
        for name, value in (c.get("resources", {}).get("requests") or {}).items():
            total[name] = total.get(name, 0) + quantity(value)
    for c in pod["spec"].get("initContainers", []):
        for name, value in (c.get("resources", {}).get("requests") or {}).items():
            total[name] = max(total.get(name, 0), quantity(value))
    return total


_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3}


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a number (the subset of suffixes our objects use)."""
    text = str(value)
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIX[suffix]
    return float(text)
