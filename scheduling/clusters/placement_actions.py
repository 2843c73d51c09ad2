"""Every write to clusters' tenant placements: the home placement of a new tenant, and reviewed changes.

A placement change is proposed (tenant admin or platform admin), then approved -- applied -- or rejected by a
platform admin, like a quota change request: one transaction, one AuditEvent each, the tenant's reconcile
enqueued on commit. Trust is checked on proposal and again on approval (the cluster may have changed).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from gpufleet import clock, k8s_names
from gpufleet.audit.record import record
from gpufleet.core.errors import ActionError, Conflict
from gpufleet.outbox import send as outbox
from scheduling import validation
from scheduling.clusters import placement
from scheduling.clusters.models import Cluster, Placement, PlacementChangeRequest, default_cluster_id
from scheduling.models import Quota
from tenants.models import FINAL_PHASES, LIVE_PHASES, Phase, Tenant


def create_cluster(name: Any, *, purpose: Any = "general", region: Any = "", region_name: Any = "",
                   zones: Any = None, trust_levels: Any = None, gitops_path: Any = "", kube_api: Any = "",
                   kubeconfig_secret: Any = "", metrics_url: Any = "", metrics_label: Any = "") -> Cluster:
    """A host cluster (platform admins). Credentials are never accepted here, only a reference to where they
    are mounted (`kubeconfig_secret`: a Secret name or an absolute file path)."""
    errors: dict[str, list[str]] = {}
    k8s_names.check(k8s_names.dns1123_label, name, "name", errors)
    if purpose not in Cluster.Purpose.values:
        errors["purpose"] = [f"must be one of {', '.join(Cluster.Purpose.values)}"]
    texts = {"region": region, "region_name": region_name, "gitops_path": gitops_path, "kube_api": kube_api,
             "kubeconfig_secret": kubeconfig_secret, "metrics_url": metrics_url, "metrics_label": metrics_label}
    for field, value in texts.items():
        if not isinstance(value, str):
            errors[field] = ["must be a string"]
    if isinstance(region, str) and region:
        k8s_names.check(k8s_names.label_value, region, "region", errors)
    if isinstance(metrics_label, str) and metrics_label:
        k8s_names.check(k8s_names.label_value, metrics_label, "metrics_label", errors)
    if isinstance(gitops_path, str):
        validation.gitops_path(gitops_path, "gitops_path", errors)
    if isinstance(kubeconfig_secret, str) and kubeconfig_secret and (
            "\n" in kubeconfig_secret or "apiVersion" in kubeconfig_secret or "token" in kubeconfig_secret.lower()):
        errors["kubeconfig_secret"] = ["must be a reference (a Secret name or a file path), never the credentials"]
    if zones is not None and (not isinstance(zones, list) or not all(isinstance(z, str) for z in zones)):
        errors["zones"] = ["must be a list of zone names"]
    levels = validation.trust_levels(trust_levels, "trust_levels", errors)
    if not errors and Cluster.objects.filter(name=name).exists():
        errors["name"] = [f"cluster '{name}' already exists"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        cluster = Cluster.objects.create(
            name=name, purpose=purpose, region=region, region_name=region_name, zones=list(zones or []),
            trust_levels=levels, gitops_path=gitops_path, kube_api=kube_api, kubeconfig_secret=kubeconfig_secret,
            metrics_url=metrics_url, metrics_label=metrics_label)
        record("cluster.create", cluster, after=cluster.spec())
        outbox.enqueue("tenants.reconcile_all")
    return cluster


def cluster_facts() -> list[placement.ClusterFacts]:
    return [placement.ClusterFacts.of(c) for c in Cluster.objects.all()]


def place_new_tenant(tenant: Tenant, *, cluster: str = "", purpose: str = "general", region: str = "") -> Placement:
    """The home placement of a tenant being requested (the registry's `on_request`): the admin's choice or the
    policy's (trust, then purpose and region). Runs inside the request's transaction."""
    existing = Placement.objects.filter(tenant=tenant, home=True).first()
    if existing:
        return existing
    if not Cluster.objects.exists():
        default_cluster_id()  # a flushed database (tests) has no cluster at all: `default`, as migrated
    name, why = placement.choose_home(cluster_facts(), tenant.trust_level, purpose=purpose, region=region,
                                      admin_choice=cluster)
    if name is None:
        raise ActionError({"cluster" if cluster else "trust_level": [why]})
    return Placement.objects.create(tenant=tenant, cluster=Cluster.objects.get(name=name), home=True)


def placements_of(tenant: Tenant) -> list[Placement]:
    return list(Placement.objects.filter(tenant=tenant).select_related("cluster"))


def _check(tenant: Tenant, cluster: Cluster, action: str) -> dict[str, list[str]]:
    placed = {p.cluster_id: p for p in Placement.objects.filter(tenant=tenant)}
    current = placed.get(cluster.pk)
    if action in (PlacementChangeRequest.Action.ADD, PlacementChangeRequest.Action.SET_HOME):
        why = placement.refusal(placement.ClusterFacts.of(cluster), tenant.trust_level)
        if why:
            return {"cluster": [why]}
    if action == PlacementChangeRequest.Action.ADD and current is not None and not leaving(current):
        return {"cluster": [f"tenant '{tenant.slug}' is already placed on '{cluster.name}'"]}
    if action == PlacementChangeRequest.Action.REMOVE:
        if current is None or leaving(current):
            return {"cluster": [f"tenant '{tenant.slug}' is not placed on '{cluster.name}'"]}
        if current.home:
            return {"cluster": [f"'{cluster.name}' is the home of '{tenant.slug}': move the home first"]}
    if action == PlacementChangeRequest.Action.SET_HOME and current is not None and current.home:
        return {"cluster": [f"'{cluster.name}' is already the home of '{tenant.slug}'"]}
    return {}


def _cluster(name: Any) -> Cluster:
    row = Cluster.objects.filter(name=name).first() if isinstance(name, str) else None
    if row is None:
        raise ActionError({"cluster": [f"unknown cluster {name!r}"]})
    return row


def propose_placement_change(tenant: Tenant, *, cluster: Any, action: Any, reason: Any = "",
                             proposed_by: Any = None) -> PlacementChangeRequest:
    if action not in PlacementChangeRequest.Action.values:
        raise ActionError({"action": [f"must be one of {', '.join(PlacementChangeRequest.Action.values)}"]})
    if not isinstance(reason, str):
        raise ActionError({"reason": ["must be a string"]})
    row = _cluster(cluster)
    if tenant.phase in FINAL_PHASES or tenant.phase == Phase.DEPROVISIONING:
        raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase} and cannot be changed")
    if errors := _check(tenant, row, action):
        raise ActionError(errors)
    with transaction.atomic():
        request = PlacementChangeRequest.objects.create(
            tenant=tenant, cluster=row, action=action, reason=reason,
            proposed_by=proposed_by if getattr(proposed_by, "pk", None) else None,
        )
        record("placement.propose", request, after={"cluster": row.name, "action": action, "reason": reason},
               tenant_slug=tenant.slug)
    return request


def _pending(request: PlacementChangeRequest) -> PlacementChangeRequest:
    request = PlacementChangeRequest.objects.select_for_update().select_related("tenant", "cluster").get(
        pk=request.pk)
    if request.state != PlacementChangeRequest.State.PENDING:
        raise Conflict(f"placement request {request.pk} is already {request.state}")
    return request


def approve_placement_change(request: PlacementChangeRequest, *, reviewer: Any = None,
                             comment: Any = "") -> PlacementChangeRequest:
    """Apply the change (trust re-checked: the tenant's level or the cluster may have changed meanwhile)."""
    with transaction.atomic():
        request = _pending(request)
        tenant = Tenant.objects.select_for_update().get(pk=request.tenant_id)
        if errors := _check(tenant, request.cluster, request.action):
            raise ActionError(errors)
        before = sorted((p.cluster.name, p.home) for p in placements_of(tenant))
        apply_change(tenant, request.cluster, request.action)
        request.state = PlacementChangeRequest.State.APPROVED
        request.reviewed_by = reviewer if getattr(reviewer, "pk", None) else None
        request.review_comment = comment if isinstance(comment, str) else ""
        request.reviewed_at = clock.now()
        request.save(update_fields=["state", "reviewed_by", "review_comment", "reviewed_at"])
        Tenant.objects.filter(pk=tenant.pk).update(generation=F("generation") + 1)
        record("placement.approve", request, before={"placements": before},
               after={"placements": sorted((p.cluster.name, p.home) for p in placements_of(tenant))},
               tenant_slug=tenant.slug)
        if tenant.phase in LIVE_PHASES:
            outbox.enqueue("tenants.reconcile_tenant", tenant.pk)
    return request


# A removed placement is kept, marked with this condition, until the reconcile has pruned the tenant's objects
# on that cluster (scheduling.clusters.delivery deletes the row then): the cluster is remembered until it is clean.
LEAVING = "Removing"


def leaving(row: Placement) -> bool:
    return any(c.get("type") == LEAVING for c in row.conditions)


def apply_change(tenant: Tenant, cluster: Cluster, action: str) -> None:
    if action == PlacementChangeRequest.Action.ADD:
        Placement.objects.update_or_create(tenant=tenant, cluster=cluster, defaults={"home": False, "conditions": []})
    elif action == PlacementChangeRequest.Action.REMOVE:
        Placement.objects.filter(tenant=tenant, cluster=cluster, home=False).update(conditions=[{
            "type": LEAVING, "status": "True", "reason": "PlacementRemoved",
            "message": "the tenant's objects on this cluster are being pruned",
            "lastTransitionTime": clock.now().isoformat()}])
        # Its quotas there go with it (the ClusterQueue they fed is pruned); audited with the approval.
        Quota.objects.filter(tenant=tenant, cluster=cluster).delete()
    else:  # set-home: the old home stays a placement (its namespace and queues), without the control plane
        Placement.objects.filter(tenant=tenant, home=True).update(home=False)
        Placement.objects.update_or_create(tenant=tenant, cluster=cluster, defaults={"home": True, "conditions": []})


def reject_placement_change(request: PlacementChangeRequest, *, reviewer: Any = None,
                            comment: Any = "") -> PlacementChangeRequest:
    with transaction.atomic():
        request = _pending(request)
        request.state = PlacementChangeRequest.State.REJECTED
        request.reviewed_by = reviewer if getattr(reviewer, "pk", None) else None
        request.review_comment = comment if isinstance(comment, str) else ""
        request.reviewed_at = clock.now()
        request.save(update_fields=["state", "reviewed_by", "review_comment", "reviewed_at"])
        record("placement.reject", request, after={"cluster": request.cluster.name, "action": request.action,
                                                   "comment": request.review_comment},
               tenant_slug=request.tenant.slug)
    return request
