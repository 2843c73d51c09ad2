"""The interface every backend (GitOps, Kubernetes) offers the reconciler."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .manifests import Manifest


@dataclass(frozen=True)
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    # The GitOps backend names the commit it made (None when nothing changed).
    revision: str | None = None
    # Objects found changed or missing behind gpufleet's back (hand edits), repaired by this apply.
    drifted: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.pruned)

    def summary(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.pruned)} pruned"
        ) + (f", {len(self.drifted)} drift repaired" if self.drifted else "")


class Backend(Protocol):
    name: str

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        """Make the objects owned by `owner` exactly `manifests`: create, update, prune the rest."""
        ...

    def owned(self, owner: str) -> list[str]:
        """Keys of the objects this backend holds for `owner`."""
        ...
