"""The interface every backend (GitOps, Kubernetes) offers the reconciler, and the optional capabilities
some offer on top of it.

`Backend` is what every backend does. Each capability below is a `runtime_checkable` Protocol: the
reconciler asks `isinstance(backend, Capability)` and takes the cheaper or fuller path when it holds. A
backend (or a test's subclass) turns one off by setting the method to None, which `isinstance` honours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .manifests import Manifest, ObjectRef


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


# --- Capabilities ------------------------------------------------------------------------------------------
# Which backend has which: GitOps (G), Kubernetes (K), Kubernetes with several host clusters (P).


@runtime_checkable
class ReadsSecrets(Protocol):
    """(K, P) Reads a Secret from the cluster: the vCluster admin kubeconfig is moved into OpenBao
    (tenants.secrets). GitOps has no cluster access; an operator's ExternalSecret does it there."""

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None: ...


@runtime_checkable
class AppliesFiles(Protocol):
    """(G) Serialises manifests to files apart from applying them, so worker processes render and serialise
    ahead of the fleet pass (tenants.prerender) and the pass only writes the files."""

    def desired_files(self, manifests: list[Manifest]) -> dict[str, bytes]: ...

    def token_of_files(self, files: dict[str, bytes]) -> tuple[str, bytes]: ...

    def apply_files(self, owner: str, desired: dict[str, bytes], *, message: str = "") -> ApplyResult: ...


@runtime_checkable
class Publishes(Protocol):
    """(G) Says why an owner's applied objects are not yet where the cluster reads them (push enabled: the
    commit is not on the remote); a tenant is Ready only once it is (tenants.reconcile)."""

    def unpublished(self, owner: str) -> str | None: ...


@runtime_checkable
class KnowsCommitted(Protocol):
    """(G) Tells cheaply whether it holds objects for each owner, so an approve applies the platform's
    shared objects only when some host cluster may lack them (tenants.reconcile)."""

    def has_committed(self, owners: Sequence[str]) -> bool: ...


@runtime_checkable
class PrunesSelectively(Protocol):
    """(K, P) Deletes some or all of an owner's objects without writing others (the ordered teardown's
    steps); a backend without it can only apply the empty set (tenants.teardown)."""

    def prune(self, owner: str, select: Callable[[ObjectRef], bool] | None = None) -> ApplyResult: ...


@runtime_checkable
class OrderedTeardown(Protocol):
    """(K, P) Tears a tenant down step by step, waiting for each step's objects to be gone (finalizers);
    without it (GitOps) the whole tenant is pruned at once and the GitOps tool orders it (tenants.teardown)."""

    ordered_teardown: bool


@runtime_checkable
class ComparesInSync(Protocol):
    """(G) Read-only, cheap check that applying `manifests` would change nothing: the fleet pass verifies
    clean tenants instead of re-applying them; without it every tenant is deferred to its own reconcile."""

    def in_sync(self, owner: str, manifests: list[Manifest]) -> bool: ...


@runtime_checkable
class Fingerprints(Protocol):
    """(G) A fingerprint of manifests (`token`) the fleet pass remembers per tenant between passes."""

    def token(self, manifests: list[Manifest]) -> tuple[str, bytes]: ...


@runtime_checkable
class ChecksFingerprints(Protocol):
    """(G) Compares a remembered fingerprint with what the backend holds for an owner, without rendering."""

    def token_in_sync(self, owner: str, token: tuple[str, bytes]) -> bool: ...


@runtime_checkable
class ChecksFingerprintsInBulk(Protocol):
    """(G) `token_in_sync` of many (owner, fingerprint) pairs in one call (the fleet's no-op pass)."""

    def tokens_in_sync(self, checks: Sequence[tuple[str, tuple[str, bytes]]]) -> list[bool]: ...


@runtime_checkable
class Batches(Protocol):
    """(G) Applies inside the block are written at once but committed together at its end (one commit per
    chunk of a fleet pass)."""

    def batch(self, message: str) -> AbstractContextManager[None]: ...


@runtime_checkable
class Maintains(Protocol):
    """(G) Upkeep run at the end of a fleet pass, off the event path (index compaction, pack merging)."""

    def maintain(self) -> None: ...


@runtime_checkable
class ReportsRepositoryStatus(Protocol):
    """(G) The repository's condition and the push sidecar's last result, for the fleet sync's status."""

    def repository_status(self) -> dict[str, object]: ...
