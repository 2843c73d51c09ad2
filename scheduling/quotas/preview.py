"""Preview of a quota change: the rendered diff of every object that would change, and the capacity
check. Rendering before/after is pure; only loading the rows touches the database."""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any

from django.db.models import Sum

from infra.manifests import Manifest, ref, to_yaml
from scheduling.actions import allowed_total, effective_capacity, held_quota
from scheduling.inputs import QuotaSpec, scheduling_of
from scheduling.models import Quota, QuotaChangeRequest
from tenants.reconcile import tenant_view
from tenants.render import RenderContext, render_placed


def manifest_diff(before: list[Manifest], after: list[Manifest]) -> tuple[list[str], str]:
    """Keys of the objects that differ, and one unified YAML diff over them (pure)."""
    old = {ref(m).key: to_yaml(m) for m in before}
    new = {ref(m).key: to_yaml(m) for m in after}
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    chunks = []
    for key in changed:
        chunks.extend(difflib.unified_diff(
            old.get(key, "").splitlines(keepends=True), new.get(key, "").splitlines(keepends=True),
            fromfile=f"a/{key}" if key in old else "/dev/null", tofile=f"b/{key}" if key in new else "/dev/null",
        ))
    return changed, "".join(chunks)


def proposed_manifests(request: QuotaChangeRequest, ctx: RenderContext | None = None) -> tuple[list, list]:
    """The tenant's objects on the request's cluster now and as they would be with the requested quota."""
    before, after, _ = proposed_on_cluster(request, ctx)
    return before, after


def proposed_on_cluster(request: QuotaChangeRequest,
                        ctx: RenderContext | None = None) -> tuple[list, list, str]:
    """(objects now, objects with the requested quota, owner) on the request's cluster; the owner carries the
    cluster's tree, so a GitOps proposal branch touches only that cluster's folder of the tenant."""
    ctx = ctx or RenderContext.from_settings()
    view = tenant_view(request.tenant)
    sched = scheduling_of(view)
    assert sched is not None, "the scheduling app's view loader fills every view"
    quota = QuotaSpec(request.nominal, request.borrowing_limit, request.lending_limit)
    cluster = request.cluster.name
    after_view = replace(view, scheduling=sched.with_quota(request.flavor.name, quota, cluster))
    before = {p.cluster: (p, objects) for p, objects in render_placed(view, ctx)}
    after = {p.cluster: objects for p, objects in render_placed(after_view, ctx)}
    if cluster not in before:  # not placed there (yet): the home placement shows the effect, if any
        cluster = next(iter(before))
    placed, objects = before[cluster]
    return objects, after[cluster], placed.owner(request.tenant.owner)


def capacity_check(request: QuotaChangeRequest) -> dict[str, Any]:
    flavor = request.flavor
    others = held_quota(flavor).exclude(tenant=request.tenant).aggregate(s=Sum("nominal"))["s"] or 0
    current = Quota.objects.filter(flavor=flavor, tenant=request.tenant).values_list("nominal", flat=True).first()
    limit = allowed_total(flavor)
    return {
        "flavor": flavor.name,
        "capacity": limit,
        "schedulable": effective_capacity(flavor),  # scheduling.figures: installed + pool headroom
        "overcommit_factor": str(flavor.overcommit_factor),
        "held_by_other_tenants": others,
        "current_nominal": current or 0,
        "requested_nominal": request.nominal,
        "fits": others + request.nominal <= limit,
        "remaining_after": limit - others - request.nominal,
    }


def simulation(request: QuotaChangeRequest) -> dict[str, Any]:
    """The cached simulated effect on the cohort (computed by the worker; see scheduling/simulation/quota.py)."""
    from scheduling.models import QuotaSimulation

    row = QuotaSimulation.objects.filter(request=request).first()
    if row is None:
        return {"state": "none"}
    return {"state": row.state, "days": row.days, "error": row.error, "result": row.result,
            "computed_at": row.computed_at.isoformat() if row.computed_at else None}


def preview(request: QuotaChangeRequest) -> dict[str, Any]:
    before, after = proposed_manifests(request)
    changed, text = manifest_diff(before, after)
    return {"objects": changed, "diff": text, "capacity": capacity_check(request), "simulation": simulation(request)}
