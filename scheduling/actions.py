"""Every write to the GPU catalog, quotas, cohorts, node pools and inference endpoints.

One transaction, one AuditEvent, the reconcile enqueued on commit. Validation runs before anything is
written; bad input raises ActionError naming the field, and then nothing changed and nothing was
enqueued. Catalog changes (flavors, cohorts, pools, priority classes) touch every tenant's
ClusterQueue, so they enqueue `reconcile_all`; tenant changes enqueue that tenant's reconcile.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Sum

from gpufleet import clock, k8s_names
from gpufleet.audit.record import record
from gpufleet.core import conf
from gpufleet.core.errors import ActionError, Conflict
from gpufleet.outbox import send as outbox
from scheduling.catalog import rules as catalog
from scheduling.clusters.models import DEFAULT_CLUSTER, Cluster, ClusterFlavor, default_cluster_id
from scheduling.nodepools import render as nodepools
from tenants.models import FINAL_PHASES, LIVE_PHASES, Phase, Tenant

from . import defaults, validation
from .models import (
    Cohort,
    Flavor,
    GpuModel,
    GpuNodePool,
    InferenceEndpoint,
    PriorityClass,
    Quota,
    QuotaChangeRequest,
    SlaTier,
    TenantScheduling,
)
from .render import REFUSED_METRICS

Errors = dict[str, list[str]]
RELEASED_PHASES = (*FINAL_PHASES, Phase.DEPROVISIONING)
ALLOWED_METRICS = ("vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")


def _enqueue_all() -> None:
    outbox.enqueue("tenants.reconcile_all")


def _enqueue_tenant(tenant: Tenant) -> None:
    if tenant.phase in LIVE_PHASES:
        outbox.enqueue("tenants.reconcile_tenant", tenant.pk)


def _bump(tenant: Tenant) -> None:
    """A scheduling change is a change of the tenant's desired state: the generation tells when it is live."""
    Tenant.objects.filter(pk=tenant.pk).update(generation=F("generation") + 1)


def _writable(tenant: Tenant) -> Tenant:
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    if tenant.phase in FINAL_PHASES or tenant.phase == Phase.DEPROVISIONING:
        raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase} and cannot be changed")
    return tenant


# --- catalog ---------------------------------------------------------------------------------------


def create_gpu_model(name: Any, dcgm_model_name: Any, memory_mib: Any, node_label_value: Any = "") -> GpuModel:
    errors: Errors = {}
    validation.name(name, "name", errors)
    if not isinstance(dcgm_model_name, str) or not dcgm_model_name.strip():
        errors["dcgm_model_name"] = ["is required (the modelName label dcgm-exporter reports)"]
    elif (not dcgm_model_name.isprintable() or not dcgm_model_name.isascii()
          or any(c in dcgm_model_name for c in '"\\{}')):
        # It is matched inside a MetricsQL selector (modelName="..."): printable ASCII, no quotes or braces.
        errors["dcgm_model_name"] = ["must be printable ASCII without quotes, braces or backslashes"]
    memory = validation.count(memory_mib, "memory_mib", errors)
    if memory == 0:
        errors["memory_mib"] = ["must be positive"]
    # GPU feature discovery labels nodes nvidia.com/gpu.product=<product with spaces as '-'>.
    label = node_label_value or ""  # taken as given: a stray "\n" is refused, not trimmed away
    if not label and isinstance(dcgm_model_name, str):
        label = validation.label_value(dcgm_model_name)
    if not label or k8s_names.label_value(label):
        errors["node_label_value"] = [f"{label!r} is not a valid label value (e.g. NVIDIA-H100-80GB-HBM3)"]
    if not errors and GpuModel.objects.filter(name=name).exists():
        errors["name"] = [f"GPU model '{name}' already exists"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        model = GpuModel.objects.create(name=name, dcgm_model_name=dcgm_model_name.strip(), memory_mib=memory,
                                        node_label_value=label)
        record("gpu_model.create", model, after={"name": name, "dcgm_model_name": model.dcgm_model_name,
                                                 "memory_mib": memory})
    return model


def _flavor_fields(mode: Any, mig_profile: Any, memory_percent: Any, cores_percent: Any, errors: Errors) -> dict:
    if mode not in catalog.MODES:
        errors["mode"] = [f"must be one of {', '.join(catalog.MODES)}"]
        return {}
    fields: dict[str, Any] = {"mode": mode, "mig_profile": "", "memory_percent": None, "cores_percent": None}
    if mode == catalog.MIG:
        if not isinstance(mig_profile, str) or not catalog.MIG_PROFILE.fullmatch(mig_profile):
            errors["mig_profile"] = ["a MIG flavor needs a profile like 3g.40gb"]
        fields["mig_profile"] = mig_profile or ""
    elif mig_profile:
        errors["mig_profile"] = ["only MIG flavors have a MIG profile"]
    if mode == catalog.HAMI:
        mem = validation.count(memory_percent, "memory_percent", errors, optional=True)
        cores = validation.count(cores_percent, "cores_percent", errors, optional=True)
        for field, value in (("memory_percent", mem), ("cores_percent", cores)):
            if value is not None and not 1 <= value <= 100:
                errors[field] = ["must be between 1 and 100"]
        if mem is None and cores is None and not {"memory_percent", "cores_percent"} & set(errors):
            errors["memory_percent"] = ["a HAMi flavor needs a memory and/or core percentage"]
        fields.update(memory_percent=mem, cores_percent=cores)
    elif memory_percent not in (None, "") or cores_percent not in (None, ""):
        errors["memory_percent" if memory_percent not in (None, "") else "cores_percent"] = [
            "only HAMi flavors have memory or core percentages"
        ]
    return fields


def create_flavor(name: Any, *, gpu_model: Any, mode: Any, mig_profile: Any = "", memory_percent: Any = None,
                  cores_percent: Any = None, capacity: Any = 0, weight: Any = None, overcommit_factor: Any = None,
                  node_labels: dict | None = None, tolerations: list | None = None,
                  taints: list | None = None) -> Flavor:
    """A flavor of an existing GPU model (unknown models are refused: their DCGM name and memory matter
    for billing, so they are created explicitly with `gpu-model create`)."""
    errors: Errors = {}
    validation.name(name, "name", errors)
    model = GpuModel.objects.filter(name=gpu_model).first() if isinstance(gpu_model, str) else None
    if model is None:
        errors["gpu_model"] = [f"unknown GPU model {gpu_model!r}; create it first (gpufleet gpu-model create)"]
    fields = _flavor_fields(mode, mig_profile, memory_percent, cores_percent, errors)
    units = validation.count(capacity, "capacity", errors, optional=True) or 0
    factor = validation.decimal(overcommit_factor, "overcommit_factor", errors, low=Decimal(1),
                                high=Decimal(10), default=Decimal(1))
    weight_value = validation.decimal(weight, "weight", errors, low=Decimal("0.0001"), high=Decimal(8),
                                      default=Decimal(0)) if weight not in (None, "") else None
    validation.labels(node_labels, "node_labels", errors)
    if isinstance(node_labels, dict) and nodepools.MODE_LABEL in node_labels and "node_labels" not in errors:
        # The platform sets it from the mode on flavors, pools and pods alike (scheduling.routing).
        errors["node_labels"] = [f"{nodepools.MODE_LABEL} is set by the platform from the flavor's mode"]
    validation.tolerations(tolerations, "tolerations", errors)
    validation.taints(taints, "taints", errors)
    if not errors and Flavor.objects.filter(name=name).exists():
        errors["name"] = [f"flavor '{name}' already exists"]
    if errors:
        raise ActionError(errors)
    if weight_value is not None:
        weight_value = weight_value.quantize(catalog.WEIGHT_QUANTUM)
    if factor is not None:
        factor = factor.quantize(Decimal("0.01"))
    if weight_value is None:
        weight_value = catalog.default_weight(fields["mode"], fields["mig_profile"], fields["memory_percent"],
                                              fields["cores_percent"])
    try:
        with transaction.atomic():
            flavor = Flavor.objects.create(
                name=name, gpu_model=model, capacity=units, weight=weight_value, overcommit_factor=factor,
                node_labels=node_labels or {}, tolerations=tolerations or [], taints=taints or [], **fields,
            )
            # A new flavor is offered on `default` with its whole capacity (single-cluster behaviour); other
            # clusters' offers are set with set_cluster_flavor, which keeps Flavor.capacity their sum.
            ClusterFlavor.objects.create(cluster_id=default_cluster_id(), flavor=flavor, capacity=units)
            record("flavor.create", flavor, after=flavor_snapshot(flavor))
            _enqueue_all()
    except IntegrityError as exc:
        raise ActionError({"name": [f"flavor '{name}' already exists"]}) from exc
    return flavor


def flavor_snapshot(flavor: Flavor) -> dict[str, Any]:
    return {"name": flavor.name, "gpu_model": flavor.gpu_model.name, "mode": flavor.mode,
            "mig_profile": flavor.mig_profile, "memory_percent": flavor.memory_percent,
            "cores_percent": flavor.cores_percent, "weight": str(flavor.weight), "capacity": flavor.capacity,
            "overcommit_factor": str(flavor.overcommit_factor)}


def set_flavor_capacity(flavor: Flavor, *, capacity: Any = None, overcommit_factor: Any = None) -> Flavor:
    """Change entered inventory or the overcommit factor; shrinking below what is promised is refused."""
    errors: Errors = {}
    units = validation.count(capacity, "capacity", errors, optional=True)
    factor = validation.decimal(overcommit_factor, "overcommit_factor", errors, low=Decimal(1),
                                high=Decimal(10), default=Decimal(0)) if overcommit_factor not in (None, "") else None
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        flavor = Flavor.objects.select_for_update().get(pk=flavor.pk)
        before = flavor_snapshot(flavor)
        if units is not None:
            # The fleet total: what is not on another cluster is on `default`.
            elsewhere = (ClusterFlavor.objects.filter(flavor=flavor).exclude(cluster_id=default_cluster_id())
                         .aggregate(n=Sum("capacity"))["n"] or 0)
            if units < elsewhere:
                raise ActionError({"capacity": [f"other clusters offer {elsewhere} units of '{flavor.name}'; "
                                                "the fleet total cannot be less"]})
            ClusterFlavor.objects.update_or_create(cluster_id=default_cluster_id(), flavor=flavor,
                                                   defaults={"capacity": units - elsewhere})
            flavor.capacity = units
        if factor is not None:
            flavor.overcommit_factor = factor
        promised = held_quota(flavor).aggregate(n=Sum("nominal"))["n"] or 0
        limit = allowed_total(flavor)
        if promised > limit:
            field = "capacity" if units is not None else "overcommit_factor"
            raise ActionError({field: [f"tenants hold {promised} units of '{flavor.name}' as nominal quota; "
                                       f"the new limit would be {limit}"]})
        flavor.save(update_fields=["capacity", "overcommit_factor"])
        record("flavor.update", flavor, before=before, after=flavor_snapshot(flavor))
        _enqueue_all()
    return flavor


def set_cluster_flavor(cluster: Any, flavor: Any, *, capacity: Any) -> ClusterFlavor:
    """Offer `flavor` on `cluster` with `capacity` units (0 keeps the offer with nothing in it); Flavor.capacity
    follows as the fleet total."""
    errors: Errors = {}
    cluster_row = Cluster.objects.filter(name=cluster).first() if isinstance(cluster, str) else None
    if cluster_row is None:
        errors["cluster"] = [f"unknown cluster {cluster!r}"]
    flavor_row = Flavor.objects.filter(name=flavor).first() if isinstance(flavor, str) else None
    if flavor_row is None:
        errors["flavor"] = [f"unknown flavor {flavor!r}"]
    units = validation.count(capacity, "capacity", errors)
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        flavor_row = Flavor.objects.select_for_update().get(pk=flavor_row.pk)  # type: ignore[union-attr]
        before = flavor_snapshot(flavor_row)
        offer, _ = ClusterFlavor.objects.update_or_create(cluster=cluster_row, flavor=flavor_row,
                                                          defaults={"capacity": units})
        flavor_row.capacity = ClusterFlavor.objects.filter(flavor=flavor_row).aggregate(n=Sum("capacity"))["n"] or 0
        promised = held_quota(flavor_row).aggregate(n=Sum("nominal"))["n"] or 0
        if promised > allowed_total(flavor_row):
            raise ActionError({"capacity": [f"tenants hold {promised} units of '{flavor_row.name}' as nominal "
                                            f"quota; the fleet would offer {allowed_total(flavor_row)}"]})
        flavor_row.save(update_fields=["capacity"])
        record("flavor.update", flavor_row, before=before,
               after={**flavor_snapshot(flavor_row), "cluster": cluster_row.name, "cluster_capacity": units})
        _enqueue_all()
    return offer


def held_quota(flavor: Flavor):  # type: ignore[no-untyped-def]
    """Quota rows that still hold capacity: a tenant being torn down (or gone) releases its share."""
    # The released tenants as a subquery (a few rows, by the phase index) that the quota scan filters on, not a
    # join of every quota row with its tenant: summing a flavor's quotas at 10,000 tenants took 12-50 ms as a
    # join (a sequential scan of the tenant table) and 4 ms like this -- on every quota change (the event path).
    released = Tenant.objects.filter(phase__in=RELEASED_PHASES).values("pk")
    return Quota.objects.filter(flavor=flavor).exclude(tenant__in=released)


def effective_capacity(flavor: Flavor) -> int:
    """Entered inventory plus what the flavor's Karpenter pools may grow to (GPUs x units per GPU)."""
    pool_gpus = GpuNodePool.objects.filter(flavor=flavor).aggregate(n=Sum("gpu_limit"))["n"] or 0
    return capacity_with_pools(flavor, pool_gpus)


def capacity_with_pools(flavor: Flavor, pool_gpus: int) -> int:
    """Pure: `effective_capacity` when the caller already summed the pools' GPU limits (a list page)."""
    return flavor.capacity + pool_gpus * catalog.units_per_gpu(flavor.weight)


def allowed_total(flavor: Flavor) -> int:
    """The most nominal quota all tenants together may hold on a flavor."""
    return int(effective_capacity(flavor) * flavor.overcommit_factor)


def create_cohort(name: Any, *, parent: Any = None, fair_sharing_weight: Any = None) -> Cohort:
    errors: Errors = {}
    validation.name(name, "name", errors)
    parent_row = None
    if parent not in (None, ""):
        parent_row = Cohort.objects.filter(name=parent).first()
        if parent_row is None:
            errors["parent"] = [f"unknown cohort {parent!r}"]
    weight = validation.decimal(fair_sharing_weight, "fair_sharing_weight", errors, low=Decimal("0"),
                                high=Decimal(1000), default=Decimal(1))
    if not errors and Cohort.objects.filter(name=name).exists():
        errors["name"] = [f"cohort '{name}' already exists"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        cohort = Cohort.objects.create(name=name, parent=parent_row, fair_sharing_weight=weight)
        record("cohort.create", cohort, after={"name": name, "parent": parent or "", "weight": str(weight)})
        _enqueue_all()
    return cohort


def create_node_pool(name: Any, *, flavor: Any, gpu_limit: Any, instance_types: Any = None,
                     capacity_types: Any = None, node_class: str = "gpu", consolidation_policy: Any = None,
                     consolidate_after: Any = "1h", allow_underutilized: bool = False,
                     gpus_per_node: Any = 8, cluster: Any = None, trust_levels: Any = None) -> GpuNodePool:
    """A Karpenter GPU NodePool. `WhenEmptyOrUnderutilized` needs allow_underutilized=True and is
    reported back as a warning (GpuNodePool.warnings): it evicts live inference."""
    errors: Errors = {}
    validation.name(name, "name", errors)
    flavor_row = Flavor.objects.filter(name=flavor).first() if isinstance(flavor, str) else None
    if flavor_row is None:
        errors["flavor"] = [f"unknown flavor {flavor!r}"]
    limit = validation.count(gpu_limit, "gpu_limit", errors)
    per_node = validation.count(gpus_per_node, "gpus_per_node", errors)
    if not errors.get("gpus_per_node") and not 1 <= per_node <= 64:
        errors["gpus_per_node"] = ["must be between 1 and 64"]
    policy = consolidation_policy or GpuNodePool.Consolidation.WHEN_EMPTY
    if policy not in GpuNodePool.Consolidation.values:
        errors["consolidation_policy"] = [f"must be one of {', '.join(GpuNodePool.Consolidation.values)}"]
    elif policy == GpuNodePool.Consolidation.WHEN_EMPTY_OR_UNDERUTILIZED and not allow_underutilized:
        errors["consolidation_policy"] = [
            "WhenEmptyOrUnderutilized evicts running GPU pods (live inference); set allow_underutilized "
            "(CLI --allow-underutilized) to override explicitly"
        ]
    if not isinstance(consolidate_after, str) or not validation.re.fullmatch(r"(\d+(s|m|h))+|Never",
                                                                             consolidate_after):
        errors["consolidate_after"] = ["must be a duration like 1h or 30m, or Never"]
    for field, value in (("instance_types", instance_types), ("capacity_types", capacity_types)):
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            errors[field] = ["must be a list of strings"]
        elif value is not None:
            # Each becomes a value of a NodePool requirement (a label value on the node).
            k8s_names.check(lambda v: k8s_names.each(k8s_names.label_value, v, "label values"), value, field, errors)
    cluster_row = Cluster.objects.filter(name=cluster or DEFAULT_CLUSTER).first() if isinstance(
        cluster, str | None) else None
    if cluster_row is None and cluster not in (None, ""):
        errors["cluster"] = [f"unknown cluster {cluster!r}"]
    levels = validation.trust_levels(trust_levels, "trust_levels", errors)
    if not errors and GpuNodePool.objects.filter(name=name).exists():
        errors["name"] = [f"node pool '{name}' already exists"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        pool = GpuNodePool.objects.create(
            cluster_id=cluster_row.pk if cluster_row else default_cluster_id(), trust_levels=levels,
            name=name, flavor=flavor_row, gpu_limit=limit, instance_types=instance_types or [],
            capacity_types=capacity_types or ["on-demand"], node_class=node_class, consolidation_policy=policy,
            consolidate_after=consolidate_after, allow_underutilized=bool(allow_underutilized),
            gpus_per_node=per_node,
        )
        record("node_pool.create", pool, after={"name": name, "flavor": flavor, "gpu_limit": limit,
                                                "consolidation_policy": policy, "warnings": pool.warnings})
        _enqueue_all()
    return pool


# --- per-tenant settings and quotas ------------------------------------------------------------------


def set_tenant_scheduling(tenant: Tenant, *, cohort: Any = None, fair_sharing_weight: Any = None,
                          priority_class: Any = None) -> TenantScheduling:
    defaults.ensure_rows()
    errors: Errors = {}
    cohort_row = priority_row = None
    if cohort not in (None, ""):
        cohort_row = Cohort.objects.filter(name=cohort).first()
        if cohort_row is None:
            errors["cohort"] = [f"unknown cohort {cohort!r}"]
    if priority_class not in (None, ""):
        priority_row = PriorityClass.objects.filter(name=priority_class).first()
        if priority_row is None:
            names = ", ".join(PriorityClass.objects.values_list("name", flat=True))
            errors["priority_class"] = [f"unknown priority class {priority_class!r} (one of {names})"]
    weight = None
    if fair_sharing_weight not in (None, ""):
        weight = validation.decimal(fair_sharing_weight, "fair_sharing_weight", errors, low=Decimal(0),
                                    high=Decimal(1000))
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        tenant = _writable(tenant)
        row, _ = TenantScheduling.objects.select_for_update().get_or_create(tenant=tenant)
        before = _settings_snapshot(row)
        if cohort_row is not None:
            row.cohort = cohort_row
        if priority_row is not None:
            row.priority_class = priority_row
        if weight is not None:
            row.fair_sharing_weight = weight
        row.save()
        after = _settings_snapshot(row)
        if after != before:
            _bump(tenant)
            record("tenant_scheduling.update", row, before=before, after=after, tenant_slug=tenant.slug)
            _enqueue_tenant(tenant)
    return row


def _settings_snapshot(row: TenantScheduling) -> dict[str, Any]:
    return {"cohort": row.cohort.name if row.cohort else "", "fair_sharing_weight": str(row.fair_sharing_weight),
            "priority_class": row.priority_class.name if row.priority_class else ""}


def check_quota(tenant: Tenant, flavor: Any, nominal: Any, borrowing_limit: Any,
                lending_limit: Any) -> tuple[Flavor, int, int | None, int | None]:
    """Every quota invariant; raises ActionError naming the field. Locks the flavor row (call in a
    transaction) so two concurrent writers cannot both fit into the last free capacity."""
    from .policy import allowed_modes

    errors: Errors = {}
    row = Flavor.objects.select_for_update().filter(name=flavor).first() if isinstance(flavor, str) else None
    if row is None:
        errors["flavor"] = [f"unknown flavor {flavor!r}"]
    elif row.mode not in allowed_modes(tenant):
        allowed = ", ".join(sorted(allowed_modes(tenant)))
        errors["flavor"] = [f"'{row.name}' is a {row.mode} flavor; tenants of trust level {tenant.trust_level} "
                            f"may use only {allowed} flavors"]
    n = validation.count(nominal, "nominal", errors)
    borrow = validation.count(borrowing_limit, "borrowing_limit", errors, optional=True)
    lend = validation.count(lending_limit, "lending_limit", errors, optional=True)
    if n is not None and lend is not None and lend > n:
        errors["lending_limit"] = [f"must not exceed the nominal quota ({lend} > {n})"]
    if row is not None and n is not None and "flavor" not in errors:
        others = held_quota(row).exclude(tenant=tenant).aggregate(s=Sum("nominal"))["s"] or 0
        limit = allowed_total(row)
        if others + n > limit:
            note = "" if row.overcommit_factor == 1 else f" (capacity x overcommit {row.overcommit_factor})"
            errors["nominal"] = [
                f"over capacity: '{row.name}' offers {limit} units{note}, other tenants hold {others}, "
                f"so at most {max(limit - others, 0)} remain"
            ]
    if errors:
        raise ActionError(errors)
    assert row is not None and n is not None
    return row, n, borrow, lend


def quota_cluster(tenant: Tenant, cluster: Any, row: Flavor | None, nominal: int | None) -> Cluster:
    """The cluster a quota is on: the one named, else the tenant's home. The tenant must be placed there (the
    placement is where its trust level was checked), the flavor offered there, and the nominal quotas of every
    tenant on it fit its capacity (x overcommit, plus its node pools). `default` is a cluster like any other:
    the fleet-wide check in check_quota() does not stand in for its own (issue 27)."""
    from scheduling.clusters.models import Placement

    if cluster in (None, ""):
        home = Placement.objects.filter(tenant=tenant, home=True).select_related("cluster").first()
        if home is None:
            raise ActionError({"cluster": [f"tenant '{tenant.slug}' has no home cluster; name one"]})
        found = home.cluster
    else:
        found = Cluster.objects.filter(name=cluster).first() if isinstance(cluster, str) else None
        if found is None:
            raise ActionError({"cluster": [f"unknown cluster {cluster!r}"]})
        if not Placement.objects.filter(tenant=tenant, cluster=found).exists():
            raise ActionError({"cluster": [f"tenant '{tenant.slug}' is not placed on cluster '{found.name}' "
                                           "(propose a placement first)"]})
    if row is None or nominal is None:
        return found
    offer = ClusterFlavor.objects.filter(cluster=found, flavor=row).first()
    if offer is None:
        raise ActionError({"flavor": [f"'{row.name}' is not offered on cluster '{found.name}'"]})
    pool_gpus = GpuNodePool.objects.filter(flavor=row, cluster=found).aggregate(n=Sum("gpu_limit"))["n"] or 0
    limit = int((offer.capacity + pool_gpus * catalog.units_per_gpu(row.weight)) * row.overcommit_factor)
    others = (held_quota(row).filter(cluster=found).exclude(tenant=tenant).aggregate(s=Sum("nominal"))["s"] or 0)
    if others + nominal > limit:
        raise ActionError({"nominal": [f"over capacity on cluster '{found.name}': '{row.name}' offers {limit} units "
                                       f"there, other tenants hold {others}, so at most {max(limit - others, 0)} "
                                       "remain"]})
    return found


class _Keep:
    """The value a quota field already has (none yet: no limit). Distinct from None, which means no limit."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


def _kept(tenant: Tenant, flavor: Any, cluster: Any, borrowing_limit: Any,
          lending_limit: Any) -> tuple[Any, Any]:
    """Limits given as KEEP replaced by the current quota's (tenant, flavor, the cluster named or the tenant's
    home); a quota that does not exist yet has no limits. A form or a Terraform configuration that leaves a
    limit out must not reset it to "no limit" (issue 27). Call with the tenant's row locked: every quota
    writer locks it first, so what is read here stays true until the write."""
    if borrowing_limit is not KEEP and lending_limit is not KEEP:
        return borrowing_limit, lending_limit
    from scheduling.clusters.models import Placement

    current = Quota.objects.none()
    if isinstance(flavor, str):
        if cluster in (None, ""):
            home = Placement.objects.filter(tenant=tenant, home=True).values_list("cluster_id", flat=True).first()
            where = {"cluster_id": home or default_cluster_id()}
        else:
            where = {"cluster__name": cluster}
        current = Quota.objects.filter(tenant=tenant, flavor__name=flavor, **where)
    quota = current.first()
    return (
        (quota.borrowing_limit if quota else None) if borrowing_limit is KEEP else borrowing_limit,
        (quota.lending_limit if quota else None) if lending_limit is KEEP else lending_limit,
    )


def update_quota(quota: Quota, **changes: Any) -> Quota:
    """PATCH: the fields given change, the others keep their value (nominal, borrowing_limit, lending_limit;
    None is "no limit"). Read and written under the tenant's row lock, so no concurrent edit is lost."""
    unknown = sorted(set(changes) - {"nominal", "borrowing_limit", "lending_limit"})
    if unknown:
        raise ActionError({name: ["is not a field that can be changed"] for name in unknown})
    with transaction.atomic():
        # The tenant's row first, as every quota writer takes it (set_quota, delete_quota): no lock-order cycle.
        _writable(quota.tenant)
        locked = Quota.objects.select_related("tenant", "flavor", "cluster").filter(pk=quota.pk).first()
        if locked is None:
            raise Conflict("the quota was deleted meanwhile")
        return set_quota(
            locked.tenant, flavor=locked.flavor.name, cluster=locked.cluster.name,
            nominal=changes.get("nominal", locked.nominal),
            borrowing_limit=changes.get("borrowing_limit", locked.borrowing_limit),
            lending_limit=changes.get("lending_limit", locked.lending_limit),
        )


def set_quota(tenant: Tenant, *, flavor: Any, nominal: Any, borrowing_limit: Any = None,
              lending_limit: Any = None, action: str = "quota.set", cluster: Any = None) -> Quota:
    """A direct quota edit (platform admins; also what an approved change request applies): create or replace.
    `cluster`: the host cluster (default: the tenant's home). A limit given as KEEP keeps its current value;
    None is "no limit"."""
    with transaction.atomic():
        tenant = _writable(tenant)
        borrowing_limit, lending_limit = _kept(tenant, flavor, cluster, borrowing_limit, lending_limit)
        row, n, borrow, lend = check_quota(tenant, flavor, nominal, borrowing_limit, lending_limit)
        on = quota_cluster(tenant, cluster, row, n)
        quota = Quota.objects.select_for_update().filter(tenant=tenant, flavor=row, cluster=on).first()
        before = quota.spec() if quota else None
        if quota is None:
            quota = Quota(tenant=tenant, flavor=row, cluster=on)
        quota.nominal, quota.borrowing_limit, quota.lending_limit = n, borrow, lend
        if quota.spec() == before:
            return quota
        quota.save()
        _bump(tenant)
        record(action, quota, before=before, after={**quota.spec(), "cluster": on.name}, tenant_slug=tenant.slug)
        _enqueue_tenant(tenant)
    return quota


def delete_quota(quota: Quota) -> None:
    """Remove a tenant's quota for a flavor (platform admins): its ClusterQueue no longer covers the flavor."""
    with transaction.atomic():
        tenant = _writable(quota.tenant)
        quota = Quota.objects.select_for_update().select_related("flavor").get(pk=quota.pk)
        record("quota.delete", quota, before=quota.spec(), tenant_slug=tenant.slug)
        quota.delete()
        _bump(tenant)
        _enqueue_tenant(tenant)


# --- reviewed quota changes ----------------------------------------------------------------------


def propose_quota_change(tenant: Tenant, *, flavor: Any, nominal: Any, borrowing_limit: Any = None,
                         lending_limit: Any = None, reason: Any = "", proposed_by: Any = None,
                         cluster: Any = None) -> QuotaChangeRequest:
    """A tenant admin asks for a quota. Checked now (a hopeless request is refused at once) and again
    at approval; in GitOps mode a branch `quota/<id>` is proposed on commit. A limit given as KEEP is the
    current quota's, written into the request so the reviewer sees the numbers that will apply."""
    if not isinstance(reason, str) or len(reason) > 2000:
        raise ActionError({"reason": ["must be text of at most 2000 characters"]})
    with transaction.atomic():
        tenant = _writable(tenant)
        borrowing_limit, lending_limit = _kept(tenant, flavor, cluster, borrowing_limit, lending_limit)
        row, n, borrow, lend = check_quota(tenant, flavor, nominal, borrowing_limit, lending_limit)
        on = quota_cluster(tenant, cluster, row, n)
        request = QuotaChangeRequest.objects.create(
            tenant=tenant, flavor=row, cluster=on, nominal=n, borrowing_limit=borrow, lending_limit=lend, reason=reason,
            proposed_by=proposed_by if getattr(proposed_by, "pk", None) else None,
        )
        request.branch = f"quota/{request.pk}"
        request.save(update_fields=["branch"])
        record("quota_request.propose", request, after={**request.spec(), "cluster": on.name, "reason": reason},
               tenant_slug=tenant.slug)
        _enqueue_proposal("propose", request.pk)
        _enqueue_simulation(request)
    return request


def _enqueue_simulation(request: QuotaChangeRequest) -> None:
    """The review shows the change simulated on recorded demand: a pending row now (the outbox), the
    worker fills it in; the beat sweep picks it up if the message is lost."""
    from .models import QuotaSimulation

    QuotaSimulation.objects.create(request=request, days=conf.QUOTA_SIMULATION_DAYS)
    outbox.enqueue("scheduling.simulate_quota_request", request.pk)


def _enqueue_proposal(step: str, request_id: int) -> None:
    task = {"propose": "scheduling.propose_quota_branch", "approve": "scheduling.merge_quota_branch",
            "reject": "scheduling.discard_quota_branch"}[step]
    outbox.enqueue(task, request_id)


def _pending(request: QuotaChangeRequest, comment: Any) -> QuotaChangeRequest:
    if not isinstance(comment, str) or len(comment) > 2000:
        raise ActionError({"comment": ["must be text of at most 2000 characters"]})
    request = QuotaChangeRequest.objects.select_for_update().get(pk=request.pk)
    if request.state != QuotaChangeRequest.State.PENDING:
        raise Conflict(f"quota request {request.pk} is already {request.state}")
    return request


def approve_quota_change(request: QuotaChangeRequest, *, reviewer: Any = None, comment: Any = "") -> QuotaChangeRequest:
    """Apply the proposed quota (invariants checked again: capacity may have been taken meanwhile)."""
    with transaction.atomic():
        request = _pending(request, comment)
        tenant = _writable(request.tenant)
        row, n, borrow, lend = check_quota(tenant, request.flavor.name, request.nominal, request.borrowing_limit,
                                           request.lending_limit)
        on = quota_cluster(tenant, request.cluster.name, row, n)
        quota = Quota.objects.select_for_update().filter(tenant=tenant, flavor=row, cluster=on).first()
        before = quota.spec() if quota else None
        quota = quota or Quota(tenant=tenant, flavor=row, cluster=on)
        quota.nominal, quota.borrowing_limit, quota.lending_limit = n, borrow, lend
        quota.save()
        _bump(tenant)
        request.state = QuotaChangeRequest.State.APPROVED
        request.reviewed_by = reviewer if getattr(reviewer, "pk", None) else None
        request.review_comment = comment
        request.reviewed_at = clock.now()
        request.save(update_fields=["state", "reviewed_by", "review_comment", "reviewed_at"])
        record("quota_request.approve", request, before=before,
               after={**request.spec(), "cluster": on.name, "comment": comment},
               tenant_slug=tenant.slug)
        # GitOps: merge the proposal branch (one commit on main); otherwise reconcile the tenant.
        _enqueue_proposal("approve", request.pk)
    return request


def reject_quota_change(request: QuotaChangeRequest, *, reviewer: Any = None, comment: Any = "") -> QuotaChangeRequest:
    with transaction.atomic():
        request = _pending(request, comment)
        request.state = QuotaChangeRequest.State.REJECTED
        request.reviewed_by = reviewer if getattr(reviewer, "pk", None) else None
        request.review_comment = comment
        request.reviewed_at = clock.now()
        request.save(update_fields=["state", "reviewed_by", "review_comment", "reviewed_at"])
        record("quota_request.reject", request, after={**request.spec(), "comment": comment},
               tenant_slug=request.tenant.slug)
        _enqueue_proposal("reject", request.pk)
    return request


# --- inference endpoints -------------------------------------------------------------------------


def check_triggers(triggers: Any, errors: Errors) -> None:
    """Tenants may name the metrics they scale on; only vLLM load signals are accepted."""
    if triggers in (None, []):
        return
    if not isinstance(triggers, list):
        errors["triggers"] = ["must be a list of metric names"]
        return
    for item in triggers:
        metric = item.get("metric") if isinstance(item, dict) else item
        text = str(metric)
        if any(refused in text for refused in REFUSED_METRICS):
            errors["triggers"] = [
                "DCGM_FI_DEV_GPU_UTIL is refused as a scaling signal: it is a duty cycle (the share of time "
                "any kernel ran), so one small request keeps it high and it does not grow with load; scale "
                "on vllm:num_requests_waiting (queue depth) and vllm:kv_cache_usage_perc (0-1) instead"
            ]
            return
        if text not in ALLOWED_METRICS:
            errors["triggers"] = [f"unknown metric {text!r}; use one of {', '.join(ALLOWED_METRICS)}"]
            return


def create_endpoint(tenant: Tenant, name: Any, *, model: Any, tier: Any, deployment: Any = None,
                    queue_target: Any = None, kv_cache_target: Any = None, triggers: Any = None,
                    gated: Any = False) -> InferenceEndpoint:
    defaults.ensure_rows()
    errors: Errors = {}
    if not isinstance(gated, bool):
        errors["gated"] = ["must be true or false"]
    elif gated and not conf.OPENBAO_ADDR:
        # Issue 26, F6: the token comes only from the tenant's OpenBao path; without a store the pod could never
        # download the model, so refuse now rather than render a Deployment that waits forever.
        errors["gated"] = ["a gated model needs the tenant's Hugging Face token from a secret store, and none is "
                           "configured (GPUFLEET_OPENBAO_ADDR): configure OpenBao, or serve a public model"]
    validation.name(name, "name", errors, max_length=50)
    if (not isinstance(model, str) or not model.strip() or len(model) > 200 or not model.isprintable()
            or any(c in model for c in '"\\{}')):
        errors["model"] = ["is required: the served model name (no quotes, braces or backslashes)"]
    deployment = deployment or (name if isinstance(name, str) else "")
    validation.name(deployment, "deployment", errors)
    tier_row = SlaTier.objects.filter(name=tier).first() if isinstance(tier, str) else None
    if tier_row is None:
        tiers = ", ".join(SlaTier.objects.values_list("name", flat=True))
        errors["tier"] = [f"unknown SLA tier {tier!r} (one of {tiers})"]
    target = validation.count(queue_target, "queue_target", errors, optional=True)
    if target == 0:
        errors["queue_target"] = ["must be at least 1"]
    kv = validation.decimal(kv_cache_target, "kv_cache_target", errors, low=Decimal("0.05"), high=Decimal("1"),
                            default=Decimal("0.8"))
    check_triggers(triggers, errors)
    if not errors and InferenceEndpoint.objects.filter(tenant=tenant, name=name).exists():
        errors["name"] = [f"endpoint '{name}' already exists in tenant '{tenant.slug}'"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        tenant = _writable(tenant)
        endpoint = InferenceEndpoint.objects.create(
            tenant=tenant, name=name, model=model.strip(), deployment=deployment, tier=tier_row,
            queue_target=target or 5, kv_cache_target=kv, gated=gated,
        )
        _bump(tenant)
        record("endpoint.create", endpoint, after=endpoint_snapshot(endpoint), tenant_slug=tenant.slug)
        _enqueue_tenant(tenant)
    return endpoint


def endpoint_snapshot(endpoint: InferenceEndpoint) -> dict[str, Any]:
    return {"name": endpoint.name, "model": endpoint.model, "deployment": endpoint.deployment,
            "tier": endpoint.tier.name, "queue_target": endpoint.queue_target,
            "kv_cache_target": str(endpoint.kv_cache_target), "gated": endpoint.gated}


def delete_endpoint(endpoint: InferenceEndpoint) -> None:
    with transaction.atomic():
        tenant = _writable(endpoint.tenant)
        snapshot = endpoint_snapshot(endpoint)
        record("endpoint.delete", endpoint, before=snapshot, tenant_slug=tenant.slug)
        endpoint.delete()
        _bump(tenant)
        _enqueue_tenant(tenant)


# --- SLA tiers -----------------------------------------------------------------------------------

CRON = validation.re.compile(r"[!-~]+( [!-~]+){4}")  # five printable-ASCII fields (fullmatch)


def tier_snapshot(tier: SlaTier) -> dict[str, Any]:
    return {"name": tier.name, "min_replicas": tier.min_replicas, "max_replicas": tier.max_replicas,
            "cooldown_seconds": tier.cooldown_seconds, "polling_seconds": tier.polling_seconds,
            "prewarm_start": tier.prewarm_start, "prewarm_end": tier.prewarm_end,
            "prewarm_replicas": tier.prewarm_replicas}


def set_sla_tier(name: Any, **fields: Any) -> SlaTier:
    """Create or change an SLA tier (data with seeded defaults). Every endpoint of the tier re-renders."""
    defaults.ensure_rows()
    errors: Errors = {}
    validation.name(name, "name", errors)
    tier = SlaTier.objects.filter(name=name).first() if isinstance(name, str) else None
    current = tier_snapshot(tier) if tier else {"min_replicas": 0, "max_replicas": 4, "cooldown_seconds": 300,
                                                 "polling_seconds": 30, "prewarm_start": "", "prewarm_end": "",
                                                 "prewarm_replicas": 1}
    unknown = sorted(set(fields) - set(current) - {"description"})
    for field in unknown:
        errors[field] = ["is not a tier field"]
    values = dict(current)
    for field in ("min_replicas", "max_replicas", "cooldown_seconds", "polling_seconds", "prewarm_replicas"):
        if fields.get(field) not in (None, ""):
            values[field] = validation.count(fields[field], field, errors)
    for field in ("prewarm_start", "prewarm_end"):
        if fields.get(field) is not None:
            values[field] = str(fields[field]).strip()
            if values[field] and not CRON.fullmatch(values[field]):
                errors[field] = ["must be a cron expression with five fields, e.g. 30 7 * * 1-5"]
    if not errors:
        if values["max_replicas"] < max(values["min_replicas"], 1):
            errors["max_replicas"] = ["must be at least 1 and not below min_replicas"]
        if bool(values["prewarm_start"]) != bool(values["prewarm_end"]):
            errors["prewarm_end" if values["prewarm_start"] else "prewarm_start"] = [
                "a pre-warm needs both a start and an end"]
        if values["polling_seconds"] == 0:
            errors["polling_seconds"] = ["must be at least 1"]
        if values["min_replicas"] == 0 and not values["prewarm_start"] and "prewarm_start" not in errors:
            # KEDA activates a ScaledObject at zero replicas only on a trigger that is active then
            # (keda@v2.20.2:pkg/scalers/prometheus_scaler.go:319 value > activationThreshold); a vLLM that
            # does not run exports no queue depth (empty result = 0 with ignoreNullValues), so only the
            # cron window (pkg/scalers/cron_scaler.go:135-151) can wake it.
            errors["prewarm_start"] = ["a tier that scales to zero needs a pre-warm window: at zero replicas vLLM "
                                       "exports no queue depth, so nothing else wakes the endpoint"]
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        before = tier_snapshot(tier) if tier else None
        tier = tier or SlaTier(name=name)
        for field in current:
            setattr(tier, field, values[field])
        if fields.get("description") is not None:
            tier.description = str(fields["description"])[:200]
        tier.save()
        if tier_snapshot(tier) != before:
            record("sla_tier.set", tier, before=before, after=tier_snapshot(tier))
            tenant_ids = set(InferenceEndpoint.objects.filter(tier=tier).values_list("tenant_id", flat=True))
            Tenant.objects.filter(pk__in=tenant_ids).update(generation=F("generation") + 1)
            _enqueue_all()
    return tier
