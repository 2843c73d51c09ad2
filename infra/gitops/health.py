"""Is the GitOps working copy fit to write to, and is what it holds committed?

The reconciler's byte comparison reads the *work tree*; the cluster syncs *commits*. The two differ
whenever a `git add` or `git commit` failed after the files were written (a stale `.git/index.lock`,
a broken `refs/heads/main`, a full disk). Everything here exists so that such a state is repaired
or reported -- never taken for "in sync".

Repairs (done under the backend's writer lock, so no other gpufleet writer can be running git):
- a `.git/index.lock` older than `STALE_LOCK_SECONDS` is left by a crashed git process: removed;
  a younger one is "busy" (a human or another tool may be mid-command): retry later;
- `refs/heads/main` that does not name a commit (truncated or garbage after a crash or a disk
  error) is reset to the last value git recorded in its reflog, if that is a commit; else reported.
Reported (each with a condition reason the reconciler puts on the tenant and the fleet sync status):
- `RepositoryBusy` (transient), `RepositoryBroken`, `RepositoryUnwritable` (permissions, full or
  read-only disk), `WrongBranch` (the work tree is not on main).
"""

from __future__ import annotations

import errno
import logging
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..errors import PermanentError, TransientError
from .git import Git

log = logging.getLogger(__name__)

MAIN = "main"
STALE_LOCK_SECONDS = 60.0


class RepositoryBusy(TransientError):
    reason = "RepositoryBusy"


class RepositoryBroken(PermanentError):
    reason = "RepositoryBroken"


class RepositoryUnwritable(PermanentError):
    reason = "RepositoryUnwritable"
    retry_after = 5.0  # an operator frees the volume or fixes its permissions: apply as soon as they have


def unwritable(exc: OSError, what: str) -> RepositoryUnwritable:
    """An OSError from writing the repository, as the error the reconciler records."""
    hint = {
        errno.ENOSPC: "the volume is full",
        errno.EDQUOT: "the volume's quota is exhausted",
        errno.EROFS: "the volume is mounted read-only",
        errno.EACCES: "permission denied (check the volume's owner and the pod's fsGroup)",
        errno.EPERM: "operation not permitted (immutable or foreign-owned files)",
    }.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return RepositoryUnwritable(f"GitOps repository is not writable: {what}: {hint} ({exc})")


_GIT_WRITE_FAILURES = ("No space left on device", "Permission denied", "Read-only file system",
                       "Operation not permitted", "Disk quota exceeded")


def classify_git_failure(exc: PermanentError) -> PermanentError:
    """A git command that failed because the disk refused the write is an unwritable repository."""
    if any(text in str(exc) for text in _GIT_WRITE_FAILURES):
        return RepositoryUnwritable(f"GitOps repository is not writable: {exc}")
    return exc


def _lock_age(path: Path) -> float | None:
    try:
        # File ages compare the filesystem's wall-clock mtime with the wall clock (not gpufleet's
        # injectable clock: the kernel stamped the file).
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


def repair_index_lock(git: Git) -> None:
    lock = git.git_dir() / "index.lock"
    age = _lock_age(lock)
    if age is None:
        return
    if git.index_busy_with_ours():
        return  # gpufleet's own index update (a drainer after a commit, a status): the writer does not need it
    if age < STALE_LOCK_SECONDS:
        raise RepositoryBusy(
            f"GitOps repository busy: {lock} exists ({age:.0f}s old; another git command is running, "
            f"or one crashed: gpufleet removes it once it is {STALE_LOCK_SECONDS:.0f}s old)",
            delay=max(2.0, STALE_LOCK_SECONDS - age),
        )
    try:
        lock.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise unwritable(exc, f"removing the stale {lock}") from exc
    log.warning("gitops: removed a stale %s (%.0fs old, left by a crashed git process)", lock, age)


def _reflog_commit(git: Git, ref: str) -> str | None:
    """The newest value the reflog recorded for `ref` that is still a commit."""
    try:
        lines = (git.git_dir() / "logs" / ref).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        parts = line.split(" ", 2)
        if len(parts) >= 2 and git.ref_exists(parts[1]):
            return parts[1]
    return None


def head_target(git: Git) -> str:
    """The branch HEAD points at, read from the file (git's own commands refuse a broken branch)."""
    try:
        text = (git.git_dir() / "HEAD").read_text().strip()
    except FileNotFoundError:
        return ""
    return text[len("ref: "):].strip() if text.startswith("ref: ") else ""


def repair_main(git: Git) -> None:
    """Make sure HEAD is `refs/heads/main` and names a commit (repairing it from the reflog)."""
    target = head_target(git)
    if target != f"refs/heads/{MAIN}":
        raise RepositoryBroken(
            f"GitOps work tree is not on {MAIN} (HEAD is {target or 'detached'}); the cluster syncs {MAIN}: "
            f"run `git -C {git.path} checkout {MAIN}` after checking what is on the other branch"
        )
    if git.ref_exists(f"refs/heads/{MAIN}"):
        return
    loose = git.git_dir() / "refs" / "heads" / MAIN
    good = _reflog_commit(git, f"refs/heads/{MAIN}")
    if good is None:
        content = loose.read_bytes()[:40] if loose.exists() else b"(missing)"
        raise RepositoryBroken(
            f"GitOps repository's refs/heads/{MAIN} does not name a commit ({content!r}) and its reflog has no "
            f"usable entry: restore it from the remote (see docs/gitops.md, 'Repairing the repository')"
        )
    try:
        loose.write_text(good + "\n")  # update-ref refuses to touch a ref it cannot parse
    except OSError as exc:
        raise unwritable(exc, f"repairing refs/heads/{MAIN}") from exc
    log.warning("gitops: refs/heads/%s did not name a commit; reset to %s from its reflog", MAIN, good)


def repair(git: Git) -> None:
    """Run every repair; raises the first problem that cannot be repaired."""
    try:
        repair_index_lock(git)
        repair_main(git)
    except PermanentError as exc:
        raise classify_git_failure(exc) from exc


def probe_writable(path: Path) -> None:
    """Create and remove a file in the work tree and in `.git` (where git writes objects and refs)."""
    for folder in (path, path / ".git" / "objects"):
        probe = folder / f".gpufleet-write-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"probe")
            probe.unlink()
        except OSError as exc:
            raise unwritable(exc, f"writing in {folder}") from exc


@dataclass(frozen=True)
class Health:
    """The repository's condition, as the fleet sync status shows it."""

    status: str  # "True" (fit to write, all committed) or "False"
    reason: str
    message: str
    head: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "reason": self.reason, "message": self.message, "head": self.head}


def check(git: Git) -> Health:
    """Read-mostly health check (only the write probe writes, and removes, one file)."""
    if not (git.path / ".git").is_dir():
        return Health("False", "RepositoryMissing", f"{git.path} is not a git repository yet")
    with ExitStack() as stack:
        try:  # no drainer of ours mid-run: an index.lock now is a foreign git's
            stack.enter_context(git.index_locked())
        except OSError:  # the lock beside the repository cannot be opened: check without it
            pass
        return _check(git)


def _check(git: Git) -> Health:
    try:
        age = _lock_age(git.git_dir() / "index.lock")
        if age is not None:
            stale = age >= STALE_LOCK_SECONDS
            return Health(
                "False",
                "StaleIndexLock" if stale else "RepositoryBusy",
                f".git/index.lock is {age:.0f}s old"
                + (" (left by a crashed git: removed by the next write)" if stale else " (a git command is running)"),
            )
        target = head_target(git)
        if target != f"refs/heads/{MAIN}" or not git.ref_exists(f"refs/heads/{MAIN}"):
            problem = f"HEAD ({target or 'detached'}) does not name a commit on {MAIN}"
            return Health("False", "RepositoryBroken", problem)
        probe_writable(git.path)
        head = git.head()
        dirty = [p for p in git.status("--porcelain", "-z", "--untracked-files=all").split("\0") if p]
    except (PermanentError, TransientError) as exc:
        return Health("False", getattr(exc, "reason", "RepositoryError"), str(exc))
    if dirty:
        problem = f"{len(dirty)} paths differ from the last commit, e.g. {dirty[0][3:]}"
        return Health("False", "Uncommitted", problem, head)
    return Health("True", "Committed", f"work tree equals commit {head[:12]} on {MAIN}", head)
