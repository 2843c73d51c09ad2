"""What the push sidecar (helm/gpufleet/files/gitops-push.sh) last did, read from the repository.

The sidecar is the only process that talks to the remote each round: it reads the remote branch's
head, refuses to push when that is not an ancestor of local main (someone else wrote there, or our
history was recreated), pushes, and records the outcome in the status folder (`.git/gpufleet/` by
default; in the chart a volume shared by the worker and the sidecar, which mounts the repository
read-only: GPUFLEET_GITOPS_PUSH_STATUS_DIR):

- `push-status`: `state=<ok|diverged|rejected|unreachable>`, `at=<epoch>`, `message=<text>` of the last round;
- `last-push`: `<epoch> <commit>` of the last successful push.

The worker reads both: the fleet sync status shows them, and with push enabled a tenant is Ready only
once the commit holding its files is an ancestor of the last pushed commit (`unpublished`).
"""

from __future__ import annotations

from pathlib import Path

from .git import Git

STATUS_FILE = "push-status"
LAST_PUSH_FILE = "last-push"


def _folder(git: Git, folder: str | Path = "") -> Path:
    return Path(folder) if folder else git.git_dir() / "gpufleet"


def last_push(git: Git, folder: str | Path = "") -> tuple[int, str] | None:
    """(epoch seconds, commit) of the last successful push, if any."""
    try:
        epoch, commit = (_folder(git, folder) / LAST_PUSH_FILE).read_text().split()[:2]
        return int(epoch), commit
    except (FileNotFoundError, ValueError):
        return None


def read_status(git: Git, enabled: bool, folder: str | Path = "") -> dict[str, object]:
    fields: dict[str, str] = {}
    try:
        for line in (_folder(git, folder) / STATUS_FILE).read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            fields[key.strip()] = value.strip()
    except FileNotFoundError:
        pass
    last = last_push(git, folder)
    return {
        "enabled": enabled,
        "state": fields.get("state", "never" if enabled else "disabled"),
        "message": fields.get("message", ""),
        "checked_epoch": int(fields["at"]) if fields.get("at", "").isdigit() else None,
        "last_success_epoch": last[0] if last else None,
        "last_pushed": last[1] if last else "",
    }


def unpublished(git: Git, commit: str, folder: str | Path = "") -> str | None:
    """None if `commit` is on the remote (an ancestor of the last pushed commit), else why not."""
    if not commit:
        return None
    last = last_push(git, folder)
    state = read_status(git, True, folder)
    detail = f" (last round: {state['state']}: {state['message']})" if state["state"] not in ("ok", "never") else ""
    if last is None:
        return f"commit {commit[:12]} is not pushed yet: no successful push so far{detail}"
    code, _ = git.probe("merge-base", "--is-ancestor", commit, last[1])
    if code == 0:
        return None
    return f"commit {commit[:12]} is not pushed yet (last push {last[1][:12]}){detail}"
