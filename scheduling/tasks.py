"""Thin Celery entry points for quota proposals. They take ids, re-read the row and are idempotent."""

from __future__ import annotations

import logging

from celery import shared_task

from gpufleet import clock, task_retry
from gpufleet.audit.context import acting
from gpufleet.core import conf
from infra.errors import PermanentError
from scheduling.quotas import proposals
from scheduling.simulation.autoscaling_plan import build_plan
from scheduling.simulation.quota import simulate_request
from scheduling.simulator import ScenarioError, parse_scenario, run_preset, simulate
from tenants.tasks import reconcile_tenant

from .models import QuotaChangeRequest, QuotaSimulation, SimulationRun

log = logging.getLogger(__name__)


def _gitops() -> bool:
    return conf.BACKEND == "gitops"


@shared_task(name="scheduling.propose_quota_branch", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def propose_quota_branch(request_id: int) -> str:
    """GitOps: (re)write branch quota/<id> with the tenant's objects as the change would make them."""
    with acting(task="scheduling.propose_quota_branch", user_id=None, token_id=None):
        request = QuotaChangeRequest.objects.select_related("tenant", "flavor").filter(pk=request_id).first()
        if request is None or request.state != QuotaChangeRequest.State.PENDING or not _gitops():
            return "nothing to do"
        try:
            return proposals.propose(request)
        except PermanentError as exc:  # e.g. no main yet: the DB request stands, approval reconciles
            log.warning("quota request %s: no proposal branch: %s", request_id, exc)
            return f"no branch: {exc}"


@shared_task(name="scheduling.merge_quota_branch", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def merge_quota_branch(request_id: int) -> str:
    """Approved: GitOps merges the proposal (one commit on main); then the tenant is reconciled."""
    with acting(task="scheduling.merge_quota_branch", user_id=None, token_id=None):
        request = QuotaChangeRequest.objects.select_related("tenant", "flavor").filter(pk=request_id).first()
        if request is None or request.state != QuotaChangeRequest.State.APPROVED:
            return "nothing to do"
        result = "reconciled"
        if _gitops():
            try:
                result = proposals.merge(request)
            except PermanentError as exc:
                log.warning("quota request %s: merge failed, reconciling instead: %s", request_id, exc)
        # Records status and observed generation; a no-op on main when the merge already wrote the files.
        reconcile_tenant.delay(request.tenant_id)
        return result


@shared_task(name="scheduling.discard_quota_branch", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def discard_quota_branch(request_id: int) -> str:
    with acting(task="scheduling.discard_quota_branch", user_id=None, token_id=None):
        request = QuotaChangeRequest.objects.filter(pk=request_id).first()
        if request is None or request.state != QuotaChangeRequest.State.REJECTED or not _gitops():
            return "nothing to do"
        return proposals.discard(request)


@shared_task(name="scheduling.simulate_quota_request", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def simulate_quota_request(request_id: int) -> str:
    """Fill in the pending simulation of a quota request (cached: a done or failed row is left alone)."""
    from django.db import transaction

    sim = QuotaSimulation.objects.select_related("request__tenant", "request__flavor").filter(
        request_id=request_id).first()
    if sim is None or sim.state != QuotaSimulation.State.PENDING:
        return "nothing to do"
    try:
        result, error, state = simulate_request(sim.request, sim.days, sim.seed), "", QuotaSimulation.State.DONE
    except ValueError as exc:  # incl. ScenarioError: the fleet's data is not a valid scenario; shown on the page
        result, error, state = {}, str(exc), QuotaSimulation.State.FAILED
    with transaction.atomic():
        updated = QuotaSimulation.objects.filter(pk=sim.pk, state=QuotaSimulation.State.PENDING).update(
            state=state, result=result, error=error, computed_at=clock.now())
    return state if updated else "nothing to do"


@shared_task(name="scheduling.sweep_quota_simulations")
def sweep_quota_simulations() -> int:
    """Beat: run simulations whose message was lost (pending for over five minutes)."""
    from datetime import timedelta

    stale = QuotaSimulation.objects.filter(state=QuotaSimulation.State.PENDING,
                                           created__lt=clock.now() - timedelta(minutes=5))
    ids = list(stale.values_list("request_id", flat=True)[:20])
    for request_id in ids:
        simulate_quota_request(request_id)
    return len(ids)


@shared_task(name="scheduling.run_simulation", acks_late=True, **task_retry.ON_DATABASE_ERRORS)
def run_simulation(run_id: int) -> str:
    """Fill in a pending portal simulation run (idempotent: a finished run is left alone)."""
    run = SimulationRun.objects.filter(pk=run_id, state=SimulationRun.State.PENDING).first()
    if run is None:
        return "nothing to do"
    try:
        if run.endpoint_id:
            result = build_plan(run.endpoint, days=run.days or 2.0, seed=run.seed, traffic=None,
                                gpus_per_replica=1, rps_per_replica=2.0)
        elif run.preset:
            result = run_preset(run.preset, run.seed, run.days)
        else:
            data = dict(run.scenario, **({"days": run.days} if run.days else {}))
            result = simulate(parse_scenario(data), run.seed)
        state, error = SimulationRun.State.DONE, ""
    except (ScenarioError, KeyError, ValueError) as exc:
        result, state, error = {}, SimulationRun.State.FAILED, str(exc)
    updated = SimulationRun.objects.filter(pk=run.pk, state=SimulationRun.State.PENDING).update(
        state=state, result=result, error=error, computed_at=clock.now())
    return state if updated else "nothing to do"
