"""Proposal branches in the GitOps repository: a reviewed change is a branch, approval merges it.

A proposal (`quota/<id>`) is ONE commit on top of main that replaces exactly one owner's folder with
what that owner's objects would be after the change. It is built with git plumbing and a private
index file (`hash-object`, `update-index`, `write-tree`, `commit-tree`, `update-ref`), so main's
working tree and index -- what the reconciler reads and writes -- are never touched.

Merging applies the proposal's files for that owner onto main's working tree and commits them:
exactly one new commit on main, touching only that owner's files (a squash of the proposal), and
the file record used for drift detection is updated as if gpufleet had applied them.

Conflict rule: if main changed the owner's folder after the proposal was made (a reconcile after
another change, a drift repair, a direct edit), the proposal no longer describes "main plus this
change" and merging it could silently revert that change. Merge refuses with PermanentError; the
caller re-proposes (renders again from the database and calls `propose` with the same branch name,
which replaces the branch) and reviews the new diff.

Every function takes the repository path and works under the same lock as `GitOpsBackend.apply`.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from ..errors import PermanentError
from ..manifests import Manifest, Owner
from .backend import GitOpsBackend

MAIN = "main"
OWNER_TRAILER = "Gpufleet-Owner"
_BRANCH = re.compile(r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")


def _backend(repo_path: str | Path) -> GitOpsBackend:
    return GitOpsBackend(repo_path)


def _check_name(branch: str) -> str:
    if branch == MAIN or not _BRANCH.match(branch) or ".." in branch or branch.endswith(".lock"):
        raise PermanentError(f"{branch!r} is not a valid proposal branch name (e.g. 'quota/42')")
    return branch


def _require(backend: GitOpsBackend, branch: str) -> str:
    _check_name(branch)
    if not backend.git.ref_exists(f"refs/heads/{branch}"):
        raise PermanentError(f"there is no proposal branch {branch!r} in the GitOps repository")
    return backend.git.run("rev-parse", f"refs/heads/{branch}").strip()


def _owner_of(backend: GitOpsBackend, commit: str) -> Owner:
    body = backend.git.run("log", "-1", "--format=%B", commit)
    for line in reversed(body.splitlines()):
        key, _, value = line.partition(":")
        if key.strip() == OWNER_TRAILER:
            return Owner.parse(value.strip())
    raise PermanentError(f"commit {commit[:12]} is not a gpufleet proposal (no {OWNER_TRAILER} trailer)")


def _tree_files(backend: GitOpsBackend, commit: str, folder: str) -> dict[str, bytes]:
    """File name -> bytes of the owner's folder at `commit` (one ls-tree, one cat-file)."""
    listing = backend.git.run("ls-tree", "-z", commit, "--", f"{folder}/")
    entries = []
    for item in filter(None, listing.split("\0")):
        meta, _, path = item.partition("\t")
        _, kind, sha = meta.split(" ")
        if kind == "blob":
            entries.append((path.rsplit("/", 1)[-1], sha))
    blobs = backend.git.read_blobs([sha for _, sha in entries])
    return {name: blobs[sha] for name, sha in entries}


def propose(repo_path: str | Path, branch: str, owner: str, manifests: list[Manifest], message: str) -> str:
    """Commit `owner`'s desired objects on `branch`, created from main (replaced if it exists)."""
    backend = _backend(repo_path)
    own = Owner.parse(owner)
    _check_name(branch)
    desired = backend.desired_files(manifests)
    git = backend.git
    with backend.locked(), tempfile.TemporaryDirectory(prefix="gpufleet-propose-") as tmp:
        base = git.run("rev-parse", f"refs/heads/{MAIN}").strip()
        # A private index: main's real index (and working tree) stay exactly as the reconciler left them.
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git.run("read-tree", base, env=env)
        git.run("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", own.path, env=env)
        names = sorted(desired)
        if names:
            paths = []
            for i, name in enumerate(names):
                path = Path(tmp) / f"{i}.yaml"
                path.write_bytes(desired[name])
                paths.append(str(path))
            shas = git.run("hash-object", "-w", "--stdin-paths", input_="\n".join(paths) + "\n").split()
            info = "".join(f"100644 {sha}\t{own.path}/{name}\n" for name, sha in zip(names, shas, strict=True))
            git.run("update-index", "--index-info", input_=info, env=env)
        tree = git.run("write-tree", env=env).strip()
        text = f"{message.strip() or f'proposal for {own}'}\n\n{OWNER_TRAILER}: {own}\n"
        commit = git.run("commit-tree", tree, "-p", base, input_=text).strip()
        git.run("update-ref", f"refs/heads/{branch}", commit)
        return commit


def diff(repo_path: str | Path, branch: str) -> str:
    """Unified diff of what merging `branch` would change (main...branch: since the proposal's base)."""
    backend = _backend(repo_path)
    with backend.locked():
        _require(backend, branch)
        return backend.git.run("diff", "--no-color", "--no-ext-diff", "--no-renames", f"{MAIN}...refs/heads/{branch}")


def merge(repo_path: str | Path, branch: str, message: str) -> str:
    """Land the proposal on main as exactly one commit touching only its owner's files; its id.

    Idempotent: merging a proposal whose files main already has makes no commit and returns main's head.
    """
    backend = _backend(repo_path)
    git = backend.git
    with backend.locked():
        tip = _require(backend, branch)
        own = _owner_of(backend, tip)
        base = git.run("rev-parse", f"{tip}^").strip()
        proposed = _tree_files(backend, tip, own.path)
        head = git.head()
        if _tree_files(backend, head, own.path) == proposed and not _dirty(backend, own):
            return head
        moved = git.run("diff", "--name-only", base, head, "--", own.path).split()
        if moved:
            raise PermanentError(
                f"main changed {own.path} after proposal {branch} was made ({len(moved)} files, e.g. "
                f"{moved[0]}); re-propose the change and review the new diff"
            )
        plan = backend.plan(own, proposed)
        plan.drifted = []  # a reviewed merge replaces the folder; it is not a drift repair
        backend._write(plan)
        backend.record_written(own, proposed)
        subject = message.strip() or f"merge proposal {branch}"
        revision = git.commit_paths(
            [own.path], f"{subject}\n\nProposal {branch} ({tip[:12]}): {plan.summary()}\n\n{OWNER_TRAILER}: {own}\n"
        )
        return revision or git.head()


def _dirty(backend: GitOpsBackend, own: Owner) -> bool:
    """Uncommitted changes in the owner's folder (a hand edit the next sync would repair)."""
    return bool(backend.git.status("--porcelain", "--", own.path).strip())


def discard(repo_path: str | Path, branch: str) -> None:
    """Delete the proposal branch; main is not touched."""
    backend = _backend(repo_path)
    with backend.locked():
        tip = _require(backend, branch)
        backend.git.run("update-ref", "-d", f"refs/heads/{branch}", tip)


def exists(repo_path: str | Path, branch: str) -> bool:
    backend = _backend(repo_path)
    with backend.locked():
        _check_name(branch)
        return backend.git.ref_exists(f"refs/heads/{branch}")
