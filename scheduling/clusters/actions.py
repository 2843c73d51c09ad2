"""Writes to host clusters (register, change) and draining a cluster's placements.

Every field is checked here, the one place the rule lives: the CLI, the API, the portal and Terraform
only pass values through, and a bad value is reported on its field with nothing changed. Credentials
are never accepted: `kubeconfig_secret` is the NAME of a Secret (or a file path) holding them, so a
value that looks like a kubeconfig or a token is refused.

Draining goes through the reviewed placement-change flow (scheduling.clusters.placement_actions): one proposal
per non-home placement -- an `add` on the target cluster first when moving, then the `remove` -- each
audited, approved right away only when a platform admin asks for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.db.models import Sum

from gpufleet import k8s_names
from gpufleet.audit.record import record
from gpufleet.core.errors import ActionError, Conflict
from gpufleet.outbox import send as outbox
from scheduling import actions, validation
from scheduling.clusters import placement_actions
from scheduling.clusters.models import DEFAULT_CLUSTER, Cluster, ClusterFlavor, Placement, PlacementChangeRequest
from scheduling.models import Flavor, GpuNodePool, Quota
from tenants.models import TrustLevel

Errors = dict[str, list[str]]
TEXT_FIELDS = {"region": 63, "region_name": 200, "gitops_path": 200, "kube_api": 300, "kubeconfig_secret": 300,
               "metrics_url": 300, "metrics_label": 63}
FIELDS = ("purpose", "region", "region_name", "zones", "trust_levels", *sorted(set(TEXT_FIELDS) - {"region",
                                                                                                  "region_name"}))
REGION = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# What a credential looks like (a kubeconfig, a PEM block, a bearer token): never stored, only referenced.
CREDENTIAL = re.compile(r"(apiVersion:|kind:\s*Config|-----BEGIN|client-key-data|token:|\n|^eyJ[A-Za-z0-9_-]{20,})")


def _text(value: Any, name: str, limit: int, errors: Errors) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errors[name] = ["must be a string"]
        return ""
    if len(value) > limit:
        errors[name] = [f"must be at most {limit} characters"]
    return value.strip()


def _strings(value: Any, name: str, errors: Errors) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors[name] = ["must be a list of strings"]
        return []
    return [v.strip() for v in value]


def clean(data: dict[str, Any], errors: Errors) -> dict[str, Any]:
    """Checked values of the fields present in `data`."""
    out: dict[str, Any] = {}
    if "purpose" in data:
        if data["purpose"] not in Cluster.Purpose.values:
            errors["purpose"] = [f"must be one of {', '.join(Cluster.Purpose.values)}"]
        else:
            out["purpose"] = data["purpose"]
    for name, limit in TEXT_FIELDS.items():
        if name in data:
            out[name] = _text(data[name], name, limit, errors)
    if out.get("region") and not REGION.match(out["region"]):
        errors["region"] = ["must be a region id such as eu-west-1 (lower-case letters, digits, '-')"]
    if "zones" in data:
        zones = _strings(data["zones"], "zones", errors)
        if any(not REGION.match(z) for z in zones):
            errors.setdefault("zones", ["each zone must be an id such as eu-west-1a"])
        elif len(set(zones)) != len(zones):
            errors["zones"] = ["must not repeat a zone"]
        out["zones"] = zones
    if "trust_levels" in data:
        levels = _strings(data["trust_levels"], "trust_levels", errors)
        unknown = [lvl for lvl in levels if lvl not in TrustLevel.values]
        if unknown:
            errors.setdefault("trust_levels", [f"unknown trust level {unknown[0]!r} (one of "
                                               f"{', '.join(TrustLevel.values)}; empty = every level)"])
        out["trust_levels"] = sorted(set(levels), key=list(TrustLevel.values).index) if not unknown else levels
    if "gitops_path" in out and "gitops_path" not in errors:
        validation.gitops_path(out["gitops_path"], "gitops_path", errors)
    for url_field in ("kube_api", "metrics_url"):
        url = out.get(url_field)
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname):
            errors[url_field] = ["must be an http(s) URL"]
    secret = out.get("kubeconfig_secret", "")
    if secret and CREDENTIAL.search(str(data.get("kubeconfig_secret", ""))):
        errors["kubeconfig_secret"] = ["must name a Secret or file holding the credentials, not contain them"]
    if out.get("metrics_label") and k8s_names.label_value(out["metrics_label"]):
        errors["metrics_label"] = k8s_names.label_value(out["metrics_label"])
    return out


def create_cluster(name: Any, **data: Any) -> Cluster:
    """Register a cluster: the checks here (URLs, zones, credential-looking references, ...), then the one
    creation path (placement_actions.create_cluster: audited, and the fleet re-rendered for it)."""
    errors: Errors = {}
    if problems := k8s_names.dns1123_label(name):
        errors["name"] = problems
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ActionError({u: ["is not a field of a cluster"] for u in unknown})
    values = clean(data, errors)
    if errors:
        raise ActionError(errors)
    try:
        return placement_actions.create_cluster(name, **values)
    except IntegrityError as exc:  # a concurrent registration of the same name
        raise ActionError({"name": [f"cluster '{name}' already exists"]}) from exc


def update_cluster(cluster: Cluster, **data: Any) -> Cluster:
    """Change a cluster's description, delivery or monitoring fields (its name is its identity)."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ActionError({u: ["is not a field of a cluster" if u != "name" else "cannot be changed"]
                           for u in unknown})
    errors: Errors = {}
    values = clean(data, errors)
    if "trust_levels" in values and not errors:
        # Narrowing trust must not strand tenants already placed there: drain them first.
        stranded = sorted(p.tenant.slug for p in Placement.objects.filter(cluster=cluster).select_related("tenant")
                          if values["trust_levels"] and p.tenant.trust_level not in values["trust_levels"]
                          and not placement_actions.leaving(p))
        if stranded:
            errors["trust_levels"] = [f"tenants placed here would no longer be allowed: {', '.join(stranded)} "
                                      "(drain their placements first)"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = cluster.spec()
        for key, value in values.items():
            setattr(cluster, key, value)
        cluster.save(update_fields=list(values) or None)
        if before != cluster.spec():
            record("cluster.update", cluster, before=before, after=cluster.spec())
            outbox.enqueue("tenants.reconcile_all")  # trust, tree or monitoring changed: re-render the fleet
    return cluster


def delete_cluster(cluster: Cluster) -> None:
    """Remove an empty cluster: no placements, node pools or quotas may still point at it (drain first).
    Its flavor offers go with it and each flavor's fleet capacity shrinks by what it offered there."""
    if cluster.name == DEFAULT_CLUSTER:
        raise Conflict(f"'{DEFAULT_CLUSTER}' is where rows without a cluster belong; it cannot be removed")
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
        still = {what: n for what, n in (
            ("placements", Placement.objects.filter(cluster=cluster).count()),
            ("node pools", GpuNodePool.objects.filter(cluster=cluster).count()),
            ("quotas", Quota.objects.filter(cluster=cluster).count())) if n}
        if still:
            listed = ", ".join(f"{n} {what}" for what, n in still.items())
            raise Conflict(f"cluster '{cluster.name}' still has {listed}: drain it first "
                           f"(gpufleet cluster drain-placements {cluster.name})")
        before = cluster.spec()
        flavors = list(Flavor.objects.select_for_update().filter(cluster_offers__cluster=cluster))
        ClusterFlavor.objects.filter(cluster=cluster).delete()
        for flavor in flavors:
            flavor.capacity = ClusterFlavor.objects.filter(flavor=flavor).aggregate(n=Sum("capacity"))["n"] or 0
            promised = actions.held_quota(flavor).aggregate(n=Sum("nominal"))["n"] or 0
            if promised > actions.allowed_total(flavor):
                raise Conflict(f"tenants hold {promised} units of '{flavor.name}' as nominal quota; without "
                               f"'{cluster.name}' the fleet would offer {actions.allowed_total(flavor)}")
            flavor.save(update_fields=["capacity"])
        record("cluster.delete", cluster, before=before)
        cluster.delete()
        outbox.enqueue("tenants.reconcile_all")


@dataclass
class DrainResult:
    cluster: str
    target: str
    requests: list[PlacementChangeRequest] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # tenants whose home is this cluster
    # "slug/flavor" quotas still on the drained cluster (approving a removal deletes the tenant's quotas there)
    quotas_left: list[str] = field(default_factory=list)


def drain_placements(cluster: Cluster, *, to: Any = "", reason: Any = "", proposed_by: Any = None,
                     approve: bool = False, reviewer: Any = None) -> DrainResult:
    """Propose removing every non-home placement on `cluster` (after adding one on `to`, when given, for
    tenants not already there); with `approve`, approve each proposal at once (platform admins only --
    the caller checks). A tenant whose HOME is on `cluster` is listed in `skipped`: moving a home (the
    vCluster control plane) is its own reviewed `set-home` change."""
    target = None
    if to:
        target = Cluster.objects.filter(name=to).first() if isinstance(to, str) else None
        if target is None:
            raise ActionError({"to": [f"unknown cluster {to!r}"]})
        if target.pk == cluster.pk:
            raise ActionError({"to": ["must be another cluster than the one drained"]})
    if not isinstance(reason, str):
        raise ActionError({"reason": ["must be a string"]})
    reason = reason or f"drain cluster {cluster.name}"
    result = DrainResult(cluster=cluster.name, target=target.name if target else "")
    # A placement already being removed (pruning in progress) is drained already.
    placements = [p for p in Placement.objects.filter(cluster=cluster).select_related("tenant").order_by(
        "tenant__slug") if not placement_actions.leaving(p)]
    # Check everything first: a refusal for one tenant must not leave the others half-drained.
    errors: Errors = {}
    if target is not None:
        for p in placements:
            if not p.home and (why := placement_actions.placement.refusal(
                    placement_actions.placement.ClusterFacts.of(target), p.tenant.trust_level)):
                errors.setdefault("to", []).append(f"{p.tenant.slug}: {why}")
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        for p in placements:
            if p.home:
                result.skipped.append(p.tenant.slug)
                continue
            steps = []
            there = Placement.objects.filter(tenant=p.tenant, cluster=target).first() if target is not None else None
            if target is not None and (there is None or placement_actions.leaving(there)):
                steps.append((target.name, PlacementChangeRequest.Action.ADD))
            steps.append((cluster.name, PlacementChangeRequest.Action.REMOVE))
            for name, action in steps:
                pending = PlacementChangeRequest.objects.filter(
                    tenant=p.tenant, cluster__name=name, action=action,
                    state=PlacementChangeRequest.State.PENDING).first()
                if pending is not None and not approve:
                    result.requests.append(pending)  # drained twice: the open proposal stands
                    continue
                change = pending or placement_actions.propose_placement_change(
                    p.tenant, cluster=name, action=action, reason=reason, proposed_by=proposed_by)
                if approve:
                    change = placement_actions.approve_placement_change(change, reviewer=reviewer,
                                                                        comment="approved with the drain")
                result.requests.append(change)
        result.quotas_left = sorted(f"{q.tenant.slug}/{q.flavor.name}" for q in Quota.objects.filter(
            cluster=cluster, tenant__slug__in=[p.tenant.slug for p in placements if not p.home])
            .select_related("tenant", "flavor"))
    return result
