"""Worker liveness probe: `python -m gpufleet.liveness` (the chart's exec probe).

A plain `celery inspect ping` goes through the broker, so while Redis is down it fails in every worker
pod at once and the kubelet restarts them all -- which cannot bring Redis back, loses in-flight work and
turns a broker blip into a restart storm. This probe first asks whether the broker answers at all:

- broker unreachable -> exit 0 ("not this pod's fault"; the worker reconnects by itself, and the
  broker's own probes and alerts are where that outage shows);
- broker reachable and this pod's node answers the ping -> exit 0;
- broker reachable and this node does not answer -> exit 1 (a wedged worker: restart it).

The node is `celery@$HOSTNAME` (a pod's HOSTNAME is its name, which Celery uses as the node name).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from gpufleet.core import conf


def broker_reachable(app, timeout: float) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    except Exception as exc:  # kombu raises OperationalError and socket errors alike
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


def push_summary() -> str:
    """The GitOps publish state as this worker sees it (informational: a stopped publish is not a reason to
    restart the worker, so it never fails the probe; `kubectl exec ... python -m gpufleet.liveness` shows it)."""
    if not (conf.GITOPS_PUSH and conf.GITOPS_REMOTE):
        return "gitops push: disabled"
    from gpufleet import clock
    from infra.gitops import publish
    from infra.gitops.git import Git

    repo = Git(Path(conf.GITOPS_REPO))
    status = publish.read_status(repo, True, conf.GITOPS_PUSH_STATUS_DIR)
    last = status["last_success_epoch"]
    age = f"{clock.now().timestamp() - int(last):.0f}s ago" if last else "never"  # type: ignore[call-overload]
    return f"gitops push: last round {status['state']}, last successful push {age}"


def main(timeout: float = 10.0) -> int:
    from gpufleet.celery import app

    node = f"celery@{os.environ.get('HOSTNAME') or socket.gethostname()}"
    reachable, why = broker_reachable(app, timeout)
    if not reachable:
        print(f"liveness: broker unreachable ({why}); not restarting {node} for it")
        return 0
    replies = app.control.ping(destination=[node], timeout=timeout)
    if any(node in reply for reply in replies):
        print(f"liveness: {node}: pong; {push_summary()}")
        return 0
    print(f"liveness: {node} did not answer a ping through a reachable broker", file=sys.stderr)
    return 1


if __name__ == "__main__":
    import django

    django.setup()
    sys.exit(main(conf.LIVENESS_TIMEOUT))
