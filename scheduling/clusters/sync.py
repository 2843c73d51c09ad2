"""Fleet sync: Celery beat re-renders and re-applies the platform's and every live tenant's objects.

It is the level-triggered backstop of issue 4 item 7: whatever a lost message, a crash or a hand
edit in the GitOps repository left behind is put back, and *drift* (an object changed or missing
behind gpufleet's back) is counted. Each run is one `SyncRun` row; the latest is the fleet's sync
status (portal snippet `scheduling/_sync_status.html`, `GET /api/v1/sync/`).

The pass is `tenants.fleet.reconcile_fleet`: a tenant whose files already equal its render costs a
render and a byte comparison; any other goes through the ordinary `reconcile_tenant` (its lock,
schema validation, status and audit), commits batched. One tenant failing is recorded, the run goes on.
"""

from __future__ import annotations

import logging

from celery import shared_task

from gpufleet import clock
from gpufleet.audit.context import acting
from infra.backend import ApplyResult, Backend, ReportsRepositoryStatus
from scheduling.clusters.sync_models import SyncRun
from tenants.backends import get_backend
from tenants.fleet import reconcile_fleet
from tenants.tasks import reconcile_tenant

log = logging.getLogger(__name__)

# Keep a run row small even when a whole folder was wiped by hand.
MAX_LISTED = 200


class _Tally:
    def __init__(self) -> None:
        self.owners = self.checked = self.changed = self.drift = 0
        self.drifted: list[str] = []
        self.errors: list[str] = []

    def add(self, result: ApplyResult) -> None:
        self.owners += 1
        self.checked += len(result.created) + len(result.updated) + len(result.unchanged) + len(result.pruned)
        self.changed += len(result.created) + len(result.updated) + len(result.pruned)
        self.drift += len(result.drifted)
        self.drifted.extend(result.drifted[: max(0, MAX_LISTED - len(self.drifted))])

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_LISTED:
            self.errors.append(message)


def sync_fleet(backend: Backend | None = None) -> SyncRun:
    """One full pass. Never raises for a single owner's failure; the run row says what happened."""
    backend = backend or get_backend()
    run = SyncRun.objects.create(started=clock.now(), backend=backend.name)
    tally = _Tally()
    state = SyncRun.State.OK
    try:
        result = reconcile_fleet(backend, message="fleet sync")
        if result.platform is not None:
            tally.add(result.platform)
        for objects in result.clean.values():
            tally.owners += 1
            tally.checked += objects
        tally.owners += len(result.deferred)  # applied by their own tasks; objects not counted here
        for outcome in result.outcomes:
            if outcome.result is not None:
                tally.add(outcome.result)
        for problem in result.errors:
            tally.error(problem)
        if result.retry or result.deferred:  # retried with backoff / fanned out by the per-tenant task

            for tenant_id in result.retry + result.deferred:
                reconcile_tenant.delay(tenant_id)
        if tally.errors:
            state = SyncRun.State.PARTIAL
    except Exception as exc:  # record the failure on the row, then let Celery see it
        state = SyncRun.State.FAILED
        tally.error(f"sync: {type(exc).__name__}: {exc}")
        raise
    finally:
        repository = _repository_status(backend)
        for problem in _repository_problems(repository):
            tally.error(problem)
            if state == SyncRun.State.OK:
                state = SyncRun.State.PARTIAL  # never "ok" over an uncommitted or unpublished state
        SyncRun.objects.filter(pk=run.pk).update(
            repository=repository,
            finished=clock.now(),
            state=state,
            owners=tally.owners,
            objects_checked=tally.checked,
            objects_changed=tally.changed,
            drift_count=tally.drift,
            drifted=tally.drifted,
            errors=tally.errors,
        )
        run.refresh_from_db()
    if tally.drift:
        log.warning("fleet sync repaired %d drifted objects: %s", tally.drift, ", ".join(tally.drifted[:10]))
    return run


def _repository_status(backend: Backend) -> dict:
    if not isinstance(backend, ReportsRepositoryStatus):
        return {}
    try:
        result: dict = backend.repository_status()
    except Exception as exc:  # the status of a broken repository must not hide the run's own result
        log.exception("fleet sync: reading the repository status failed")
        return {"status": "False", "reason": "StatusUnavailable", "message": f"{type(exc).__name__}: {exc}"}
    return result


def _repository_problems(repository: dict) -> list[str]:
    """What the repository status says is wrong, as run errors (empty when all is committed and,
    with push enabled, the last push round succeeded)."""
    problems = []
    if repository and repository.get("status") != "True":
        problems.append(f"repository: {repository.get('reason')}: {repository.get('message')}")
    push = repository.get("push") or {}
    if push.get("enabled") and push.get("state") != "ok":
        problems.append(f"push: {push.get('state')}: {push.get('message') or 'no successful push yet'}")
    return problems


def latest() -> SyncRun | None:
    return SyncRun.objects.order_by("-started", "-id").first()


@shared_task(name="scheduling.sync_fleet", acks_late=True)
def sync_fleet_task() -> dict:
    """Beat entry point: takes nothing, re-reads everything, safe to run twice (or concurrently)."""
    with acting(task="scheduling.sync_fleet", user_id=None, token_id=None):
        return sync_fleet().as_status()
