"""GitOps backend: desired state as one YAML file per object in a git repository.

Argo CD or Flux syncs the repository into the cluster. We commit only real changes, so `git log`
is the history of what gpufleet wanted and when; a no-op reconcile reads files and writes nothing
(no git subprocess at all: bytes are compared in Python).

Drift: for every owner we keep, outside the tracked tree (`.git/gpufleet/`), the SHA-256 of each
file as gpufleet last wrote it. A file that must be rewritten and whose bytes are not what we last
wrote (edited or deleted by hand, committed or not, or added by hand) is *drift*: the same apply
repairs it, counts it in `ApplyResult.drifted`, and says "repair drift" in the commit message.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..backend import ApplyResult
from ..errors import PermanentError
from ..manifests import Manifest, ObjectRef, Owner, ref, to_yaml
from .git import Git


def file_name(obj: ObjectRef) -> str:
    """One file per object; group in the name because kinds repeat across groups (Topology)."""
    group = obj.group or "core"
    if obj.namespace:
        return f"{obj.kind.lower()}.{group}_{obj.namespace}_{obj.name}.yaml"
    return f"{obj.kind.lower()}.{group}_{obj.name}.yaml"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Plan:
    """What one owner's apply will do to its folder (computed under the lock, before any write)."""

    owner: Owner
    desired: dict[str, bytes]
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    drifted: list[str] = field(default_factory=list)
    index_stale: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.pruned)

    def summary(self) -> str:
        text = f"{len(self.created)} created, {len(self.updated)} updated, {len(self.pruned)} pruned"
        return text + (f", {len(self.drifted)} drifted" if self.drifted else "")

    def result(self, revision: str | None) -> ApplyResult:
        base = self.owner.path
        return ApplyResult(
            created=[f"{base}/{n}" for n in self.created],
            updated=[f"{base}/{n}" for n in self.updated],
            unchanged=[f"{base}/{n}" for n in self.unchanged],
            pruned=[f"{base}/{n}" for n in self.pruned],
            revision=revision,
            drifted=[f"{base}/{n}" for n in self.drifted],
        )


class GitOpsBackend:
    name = "gitops"

    def __init__(self, path: str | Path, author: str = "gpufleet <gpufleet@localhost>") -> None:
        self.path = Path(path)
        self.git = Git(self.path, author)
        # Inside `batch()`: owner folders written but not yet committed, and their summaries.
        self._batch: dict[str, Plan] | None = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time: git's index is shared by every tenant's apply (and by proposals)."""
        self.path.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.parent / f".{self.path.name}.lock"
        with open(lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.git.ensure_repo()
                if self._batch is None:
                    self._commit_interrupted_batch()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- what is on disk, and what gpufleet last wrote -------------------------------------------

    def _existing(self, folder: Path) -> dict[str, bytes]:
        if not folder.is_dir():
            return {}
        return {
            entry.name: Path(entry.path).read_bytes()
            for entry in os.scandir(folder)
            if entry.is_file() and entry.name.endswith(".yaml")
        }

    def _index_path(self, own: Owner) -> Path:
        return self.git.git_dir() / "gpufleet" / "written" / (own.path.replace("/", "__") + ".json")

    def written(self, own: Owner) -> dict[str, str] | None:
        """File name -> SHA-256 of what gpufleet last wrote for this owner; None if never recorded."""
        try:
            return dict(json.loads(self._index_path(own).read_text()))
        except FileNotFoundError:
            return None

    def record_written(self, own: Owner, files: dict[str, bytes]) -> None:
        path = self._index_path(own)
        if not files:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({name: sha256(data) for name, data in sorted(files.items())}))
        tmp.replace(path)  # atomic: a crash never leaves half an index

    # --- planning and writing --------------------------------------------------------------------

    def desired_files(self, manifests: list[Manifest]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for manifest in manifests:
            name = file_name(ref(manifest))
            if name in files:
                raise PermanentError(f"two rendered objects share the identity {ref(manifest)}")
            files[name] = to_yaml(manifest).encode()
        return files

    def plan(self, own: Owner, desired: dict[str, bytes]) -> Plan:
        existing = self._existing(self.path / own.path)
        written = self.written(own)
        plan = Plan(own, desired)
        for name in sorted(desired.keys() | existing.keys()):
            want, have = desired.get(name), existing.get(name)
            if have is None:
                plan.created.append(name)
            elif want is None:
                plan.pruned.append(name)
            elif have != want:
                plan.updated.append(name)
            else:
                plan.unchanged.append(name)
                continue
            # Needs a write. Drift if the bytes on disk are not what we last wrote. Without any record
            # (a repository from before drift tracking) nothing can be called drift.
            if written is not None:
                on_disk = sha256(have) if have is not None else None
                if on_disk != written.get(name):
                    plan.drifted.append(name)
        if written is None:
            plan.index_stale = bool(desired)
        else:
            plan.index_stale = written.keys() != desired.keys() or any(
                written[name] != sha256(data) for name, data in desired.items()
            )
        return plan

    def _write(self, plan: Plan) -> None:
        folder = self.path / plan.owner.path
        if plan.changed:
            folder.mkdir(parents=True, exist_ok=True)
            for name in plan.created + plan.updated:
                (folder / name).write_bytes(plan.desired[name])
            for name in plan.pruned:
                (folder / name).unlink()
            if not plan.desired and folder.exists() and not any(folder.iterdir()):
                folder.rmdir()
        if plan.changed or plan.index_stale:
            self.record_written(plan.owner, plan.desired)

    @staticmethod
    def _subject(message: str, plans: Sequence[Plan]) -> str:
        drifted = sum(len(p.drifted) for p in plans)
        return f"{message}: repair drift ({drifted} objects)" if drifted else message

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        own = Owner.parse(owner)
        desired = self.desired_files(manifests)
        with self.locked():
            plan = self.plan(own, desired)
            self._write(plan)
            revision = None
            if plan.changed and self._batch is not None:
                # Committed when the batch ends; recorded on disk so a crash cannot strand the files.
                self._batch[own.path] = plan
                self._pending_path().write_text("\n".join(sorted(self._batch)))
            elif plan.changed:
                subject = self._subject(message or owner, [plan])
                revision = self.git.commit_paths([own.path], f"{subject}\n\n{plan.summary()}")
            return plan.result(revision)

    # --- many owners, one commit -----------------------------------------------------------------

    def _pending_path(self) -> Path:
        """This batch's list of written-but-uncommitted folders (one file per batch: batches in two
        processes never overwrite each other's list)."""
        path = self.git.git_dir() / "gpufleet" / f"pending-{os.getpid()}-{id(self)}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _commit_interrupted_batch(self) -> None:
        """A batch that died between writing and committing left files that would look unchanged
        to every later apply (bytes equal the desired state) and so never reach git. Commit them.
        (A batch still running elsewhere only gets its commit split in two: harmless.)"""
        folder = self.git.git_dir() / "gpufleet"
        if not folder.is_dir():
            return
        for pending in sorted(folder.glob("pending-*")):
            paths = [p for p in pending.read_text().split() if p]
            if paths:
                self.git.commit_paths(paths, "gpufleet: commit the changes of an interrupted batch")
            pending.unlink(missing_ok=True)

    @contextmanager
    def batch(self, message: str) -> Iterator[None]:
        """Applies inside the block write files at once but commit together, in one commit, at the end.

        For fleet-wide passes (the cold start of a thousand tenants): one `git add`/`git commit`
        instead of one per tenant. Applies inside report `revision=None`; the batch's commit follows.
        """
        if self._batch is not None:
            raise RuntimeError("GitOpsBackend.batch() does not nest")
        self._batch = {}
        try:
            yield
        finally:
            # Commit what was written even if the block failed: each owner's apply was complete.
            try:
                with self.locked():
                    if self._batch:
                        plans = [self._batch[path] for path in sorted(self._batch)]
                        body = "\n".join(f"{p.owner}: {p.summary()}" for p in plans)
                        self.git.commit_paths(sorted(self._batch), f"{self._subject(message, plans)}\n\n{body}")
                    self._pending_path().unlink(missing_ok=True)
            finally:
                self._batch = None

    def in_sync(self, owner: str, manifests: list[Manifest]) -> bool:
        """Read-only, lock-free check: would `apply` change nothing? (No git call: bytes compared.)"""
        plan = self.plan(Owner.parse(owner), self.desired_files(manifests))
        return not plan.changed and not plan.index_stale

    def apply_many(
        self, batch: Sequence[tuple[str, list[Manifest]]], *, message: str
    ) -> dict[str, ApplyResult]:
        """Apply many owners under one lock and record every change in ONE commit.

        For the cold path and the fleet sync: a thousand tenants are one commit instead of a
        thousand `git add`/`git commit` pairs. Each owner keeps `apply`'s semantics (prune, drift).
        """
        owners = [(Owner.parse(owner), self.desired_files(manifests)) for owner, manifests in batch]
        if len({own for own, _ in owners}) != len(owners):
            raise PermanentError("apply_many got the same owner twice")
        with self.locked():
            plans = [self.plan(own, desired) for own, desired in owners]
            for plan in plans:
                self._write(plan)
            changed = [p for p in plans if p.changed]
            revision = None
            if changed:
                body = "\n".join(f"{p.owner}: {p.summary()}" for p in changed)
                revision = self.git.commit_paths(
                    [p.owner.path for p in changed], f"{self._subject(message, changed)}\n\n{body}"
                )
            return {str(p.owner): p.result(revision if p.changed else None) for p in plans}

    def owned(self, owner: str) -> list[str]:
        own = Owner.parse(owner)
        return sorted(f"{own.path}/{n}" for n in self._existing(self.path / own.path))
