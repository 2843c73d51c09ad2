"""The one-time move of a single-cluster repository's root tree into its cluster's folder.

Before host clusters the repository held `platform/` and `tenants/<slug>/` at its root; now every cluster has
its tree (`clusters/<name>/platform/`, `clusters/<name>/tenants/<slug>/`). An upgraded installation's objects
belong to the cluster `default`, so the first reconcile after the migration moves the root tree there: ONE
commit of pure renames (`git mv`, bytes unchanged), and gpufleet's record of what it wrote (`.git/gpufleet/`,
for drift) moves with it, so the reconcile that follows finds everything in place and commits nothing.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import PermanentError
from .backend import GitOpsBackend

ROOTS = ("platform", "tenants")


def has_root_layout(repo: Path) -> bool:
    return any((repo / root).is_dir() for root in ROOTS)


def move_root_layout(backend: GitOpsBackend, tree: str) -> str | None:
    """Move `platform/` and `tenants/` under `tree` in one commit; the revision, or None if nothing to move."""
    if not tree or not has_root_layout(backend.path):
        return None  # the common case: two stats, no lock, no git
    with backend.locked(), backend.git.index_locked():
        backend.git.settle_index()
        roots = [root for root in ROOTS if (backend.path / root).is_dir()]
        if not roots:
            return None
        for root in roots:
            if (backend.path / tree / root).exists():
                raise PermanentError(
                    f"the repository has both {root}/ and {tree}/{root}/: move or delete one by hand "
                    "(gpufleet does not merge two layouts)")
        (backend.path / tree).mkdir(parents=True, exist_ok=True)
        tracked = set(backend.git.run("ls-files", "-z", "--", *roots).split("\0")) - {""}
        for root in roots:
            if any(path.startswith(f"{root}/") for path in tracked):
                backend.git.run("mv", "-k", "--", root, f"{tree}/{root}")
            if (backend.path / root).exists():  # files git does not track (mv -k leaves them): move as they are
                (backend.path / root).rename(backend.path / tree / root)
        _move_written_index(backend, tree, roots)
        message = (f"gpufleet: move {', '.join(f'{r}/' for r in roots)} to {tree}/ (host clusters; "
                   "renames only, no object changed)")
        backend.git.run("add", "-A", "--", *(f"{tree}/{root}" for root in roots))
        staged = [p for p in backend.git.run("diff", "--cached", "--name-only", "-z").split("\0") if p]
        ours = tuple(f"{root}/" for root in roots) + tuple(f"{tree}/{root}/" for root in roots)
        if not staged:
            return None
        if any(not path.startswith(ours) for path in staged):
            raise PermanentError("other changes are staged in the GitOps repository; commit or reset them first")
        backend.git.run("commit", "-q", "-m", message)
        return backend.git.head()


def _move_written_index(backend: GitOpsBackend, tree: str, roots: list[str]) -> None:
    """The per-owner drift records are named after the owner's folder (`tenants__acme.json`)."""
    folder = backend.git.git_dir() / "gpufleet" / "written"
    if not folder.is_dir():
        return
    prefix = tree.replace("/", "__") + "__"
    for record in sorted(folder.glob("*.json")):
        if (record.name == "platform.json" and "platform" in roots) or \
                (record.name.startswith("tenants__") and "tenants" in roots):
            record.replace(folder / (prefix + record.name))
