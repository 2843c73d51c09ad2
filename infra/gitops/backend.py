"""GitOps backend: desired state as one YAML file per object in a git repository.

Argo CD or Flux syncs the repository into the cluster. We commit only real changes, so `git log`
is the history of what gpufleet wanted and when; a no-op reconcile reads files and writes nothing.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
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


class GitOpsBackend:
    name = "gitops"

    def __init__(self, path: str | Path, author: str = "gpufleet <gpufleet@localhost>") -> None:
        self.path = Path(path)
        self.git = Git(self.path, author)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time: git's index is shared by every tenant's apply."""
        self.path.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.parent / f".{self.path.name}.lock"
        with open(lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.git.ensure_repo()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _existing(self, folder: Path) -> dict[str, bytes]:
        if not folder.is_dir():
            return {}
        return {
            entry.name: Path(entry.path).read_bytes()
            for entry in os.scandir(folder)
            if entry.is_file() and entry.name.endswith(".yaml")
        }

    def desired_files(self, manifests: list[Manifest]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for manifest in manifests:
            name = file_name(ref(manifest))
            if name in files:
                raise PermanentError(f"two rendered objects share the identity {ref(manifest)}")
            files[name] = to_yaml(manifest).encode()
        return files

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        own = Owner.parse(owner)
        desired = self.desired_files(manifests)
        with self.locked():
            folder = self.path / own.path
            existing = self._existing(folder)
            created = sorted(n for n in desired if n not in existing)
            updated = sorted(n for n in desired if n in existing and existing[n] != desired[n])
            unchanged = sorted(n for n in desired if n in existing and existing[n] == desired[n])
            pruned = sorted(n for n in existing if n not in desired)
            revision = None
            if created or updated or pruned:
                folder.mkdir(parents=True, exist_ok=True)
                for name in created + updated:
                    (folder / name).write_bytes(desired[name])
                for name in pruned:
                    (folder / name).unlink()
                if not desired and folder.exists() and not any(folder.iterdir()):
                    folder.rmdir()
                summary = f"{len(created)} created, {len(updated)} updated, {len(pruned)} pruned"
                revision = self.git.commit_paths([own.path], f"{message or owner}\n\n{summary}")
            return ApplyResult(
                created=[f"{own.path}/{n}" for n in created],
                updated=[f"{own.path}/{n}" for n in updated],
                unchanged=[f"{own.path}/{n}" for n in unchanged],
                pruned=[f"{own.path}/{n}" for n in pruned],
                revision=revision,
            )

    def owned(self, owner: str) -> list[str]:
        own = Owner.parse(owner)
        return sorted(f"{own.path}/{n}" for n in self._existing(self.path / own.path))
