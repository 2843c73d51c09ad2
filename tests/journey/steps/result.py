"""The outcome of one step of a pod's journey (a minimal local copy; the lead reconciles it with the
pod-journey suite's own StepResult at merge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StepResult:
    ok: bool
    reason: str  # what a tenant (or operator) would be told; on success, what happened
    pod: dict[str, Any] = field(default_factory=dict)  # the pod as the step leaves it
