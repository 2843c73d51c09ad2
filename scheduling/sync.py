"""Fleet sync: Celery beat re-renders and re-applies the platform's and every live tenant's objects.

It is the level-triggered backstop of issue 4 item 7: whatever a lost message, a crash or a hand
edit in the GitOps repository left behind is put back, and *drift* (an object changed or missing
behind gpufleet's back) is counted. Each run is one `SyncRun` row; the latest is the fleet's sync
status (portal snippet `scheduling/_sync_status.html`, `GET /api/v1/sync/`).

Each tenant goes through the ordinary `tenants.reconcile.reconcile_tenant` (its lock, schema
validation, status and audit), with the platform-wide render inputs loaded once for the whole run.
One tenant failing is recorded and the run goes on.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from gpufleet.audit.context import acting
from infra.backend import ApplyResult, Backend
from infra.errors import InfraError
from tenants import reconcile
from tenants.backends import get_backend
from tenants.models import Tenant
from tenants.render import RenderContext

from .models_sync import SyncRun

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

    def error(self, who: str, message: str) -> None:
        if len(self.errors) < MAX_LISTED:
            self.errors.append(f"{who}: {message}")


def sync_fleet(backend: Backend | None = None) -> SyncRun:
    """One full pass. Never raises for a single owner's failure; the run row says what happened."""
    backend = backend or get_backend()
    run = SyncRun.objects.create(started=timezone.now(), backend=getattr(backend, "name", ""))
    tally = _Tally()
    state = SyncRun.State.OK
    try:
        ctx = RenderContext.from_settings()  # the catalog once per run, not once per tenant
        try:
            tally.add(reconcile.reconcile_platform(backend))
        except InfraError as exc:
            tally.error("platform", str(exc))
        for tenant_id in Tenant.objects.live().order_by("pk").values_list("pk", flat=True):
            try:
                outcome = reconcile.reconcile_tenant(tenant_id, backend, ctx=ctx)
            except InfraError as exc:  # transient: the next run (or the tenant's own retry) repairs it
                tally.error(f"tenant {tenant_id}", str(exc))
                continue
            except Exception as exc:  # a bug or bad row in one tenant must not stop the fleet's repair
                log.exception("fleet sync: tenant %s failed", tenant_id)
                tally.error(f"tenant {tenant_id}", f"{type(exc).__name__}: {exc}")
                continue
            if outcome.result is not None:
                tally.add(outcome.result)
            for problem in outcome.problems:
                tally.error(outcome.tenant, problem)
        if tally.errors:
            state = SyncRun.State.PARTIAL
    except Exception as exc:  # record the failure on the row, then let Celery see it
        state = SyncRun.State.FAILED
        tally.error("sync", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        SyncRun.objects.filter(pk=run.pk).update(
            finished=timezone.now(),
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


def latest() -> SyncRun | None:
    return SyncRun.objects.order_by("-started", "-id").first()


@shared_task(name="scheduling.sync_fleet", acks_late=True)
def sync_fleet_task() -> dict:
    """Beat entry point: takes nothing, re-reads everything, safe to run twice (or concurrently)."""
    with acting(task="scheduling.sync_fleet", user_id=None, token_id=None):
        return sync_fleet().as_status()
