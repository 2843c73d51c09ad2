"""One queue view across clusters: per tenant x flavor x cluster, the quota, what is admitted now, and the
tenant's pending demand and admission waits on that cluster.

Pure core (`build_rows`): quota rows, placements and per-cluster metric samples in, rows out. The edge
(`collect`) reads Kueue's LocalQueue metrics (the `LocalQueueMetrics` gate: beta, on by default since
Kueue v0.17; labels per crds/kueue/metrics.md at v0.19.2) from each cluster's own metrics source, or the
shared one filtered by the cluster's `cluster` external label:

- admitted units: `kueue_local_queue_resource_usage{namespace, name, flavor, resource}`, the flavor's
  counting resource (the first it covers: GPUs, MIG instances, HAMi vGPUs);
- pending workloads: `kueue_local_queue_pending_workloads{namespace, status}` (active + inadmissible).
  Kueue picks a flavor only at admission, so pending demand and waits are per tenant x cluster (the
  tenant's queue there), repeated on each of its flavor rows on that cluster, never summed per flavor;
- admission wait: `kueue_local_queue_admission_wait_time_seconds` histogram over the last hour (p90 and mean).

A namespace's numbers on cluster C are tenant T's only if T is placed on C. On a tenant's home cluster in
MultiKueue mode the `gpu-dispatch` LocalQueue only mirrors work running on the workers, so its usage is
not counted there (it is counted on the worker that runs it). One cluster whose metrics cannot be read
marks its own rows (`metrics_error`) and never hides the others'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from billing import metrics_source
from gpufleet.core import metrics
from infra.errors import PermanentError, TransientError
from infra.metrics import connection_reason
from scheduling.clusters.multikueue import DISPATCH_LOCAL_QUEUE
from scheduling.clusters.placement_actions import leaving
from scheduling.models import Flavor, Placement, Quota

WAIT_WINDOW = "1h"
TENANT_NAMESPACE_PREFIX = "tenant-"


@dataclass(frozen=True)
class QuotaFact:
    tenant: str
    flavor: str
    cluster: str
    nominal: int
    borrowing_limit: int | None = None


@dataclass(frozen=True)
class PlacementFact:
    tenant: str
    cluster: str
    home: bool = False


@dataclass(frozen=True)
class ClusterSamples:
    """What one cluster's metrics said (all None/empty with `error` set when they could not be read)."""

    # (namespace, local queue, flavor, resource) -> admitted amount
    usage: Mapping[tuple[str, str, str, str], Decimal] = field(default_factory=dict)
    pending: Mapping[str, Decimal] = field(default_factory=dict)  # namespace -> workloads
    wait_p90: Mapping[str, Decimal] = field(default_factory=dict)  # namespace -> seconds
    wait_mean: Mapping[str, Decimal] = field(default_factory=dict)  # namespace -> seconds
    error: str = ""


@dataclass(frozen=True)
class QueueRow:
    tenant: str
    flavor: str
    cluster: str
    home: bool
    nominal: int
    borrowing_limit: int | None
    admitted: Decimal | None
    pending_workloads: int | None
    wait_p90_seconds: Decimal | None
    wait_mean_seconds: Decimal | None
    metrics_error: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def namespace_of(slug: str) -> str:
    return f"{TENANT_NAMESPACE_PREFIX}{slug}"


def build_rows(quotas: Iterable[QuotaFact], placements: Iterable[PlacementFact],
               samples: Mapping[str, ClusterSamples], resources: Mapping[str, str]) -> list[QueueRow]:
    """Rows for every (tenant, flavor, cluster) with a quota there or admitted usage there, for placed
    tenants only. `resources`: flavor name -> its counting resource."""
    placed = {(p.tenant, p.cluster): p.home for p in placements}
    keys: dict[tuple[str, str, str], QuotaFact | None] = {}
    for q in quotas:
        if (q.tenant, q.cluster) in placed:
            keys[(q.tenant, q.flavor, q.cluster)] = q
    admitted: dict[tuple[str, str, str], Decimal] = {}
    tenants_by_ns = {namespace_of(t): t for t, _ in placed}
    for cluster, s in samples.items():
        for (namespace, local_queue, flavor, resource), value in s.usage.items():
            tenant = tenants_by_ns.get(namespace)
            if tenant is None or (tenant, cluster) not in placed or resources.get(flavor) != resource:
                continue
            if local_queue == DISPATCH_LOCAL_QUEUE and placed[(tenant, cluster)]:
                continue  # the manager's mirror of work that runs (and is counted) on a worker
            key = (tenant, flavor, cluster)
            admitted[key] = admitted.get(key, Decimal(0)) + value
            keys.setdefault(key, None)
    rows = []
    for (tenant, flavor, cluster), quota in sorted(keys.items()):
        s = samples.get(cluster, ClusterSamples(error="no metrics read"))
        ns = namespace_of(tenant)
        ok = not s.error
        pending = s.pending.get(ns, Decimal(0)) if ok else None
        rows.append(QueueRow(
            tenant=tenant, flavor=flavor, cluster=cluster, home=placed[(tenant, cluster)],
            nominal=quota.nominal if quota else 0, borrowing_limit=quota.borrowing_limit if quota else None,
            admitted=admitted.get((tenant, flavor, cluster), Decimal(0)) if ok else None,
            pending_workloads=int(pending) if pending is not None else None,
            wait_p90_seconds=s.wait_p90.get(ns) if ok else None,
            wait_mean_seconds=s.wait_mean.get(ns) if ok else None,
            metrics_error=s.error,
        ))
    return rows


# --- reading one cluster's metrics ---------------------------------------------------------------------


def selector(label: str, *matchers: str) -> str:
    """A series selector over tenant namespaces, narrowed to one cluster's series when it has a label."""
    parts = [f'namespace=~"{TENANT_NAMESPACE_PREFIX}.+"', *matchers]
    if label:
        parts.insert(0, f'cluster="{_escape(label)}"')
    return "{" + ", ".join(parts) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def queries(label: str) -> dict[str, str]:
    usage = f"kueue_local_queue_resource_usage{selector(label)}"
    pending = f"kueue_local_queue_pending_workloads{selector(label)}"
    bucket = f"kueue_local_queue_admission_wait_time_seconds_bucket{selector(label)}"
    total = f"kueue_local_queue_admission_wait_time_seconds_sum{selector(label)}"
    count = f"kueue_local_queue_admission_wait_time_seconds_count{selector(label)}"
    return {
        "usage": f"sum by (namespace, name, flavor, resource) ({usage})",
        "pending": f"sum by (namespace) ({pending})",
        "wait_p90": f"histogram_quantile(0.9, sum by (namespace, le) (increase({bucket}[{WAIT_WINDOW}])))",
        "wait_mean": (f"sum by (namespace) (increase({total}[{WAIT_WINDOW}])) / "
                      f"sum by (namespace) (increase({count}[{WAIT_WINDOW}]))"),
    }


Query = Callable[[str], list[Any]]  # an instant query at a fixed time: promql -> [Series]


def read_cluster(query: Query, label: str) -> ClusterSamples:
    """One cluster's samples. Any failure of its source becomes `error` (the caller goes on)."""
    q = queries(label)
    try:
        usage = {(s.labels.get("namespace", ""), s.labels.get("name", ""), s.labels.get("flavor", ""),
                  s.labels.get("resource", "")): s.value for s in query(q["usage"])}
        pending = {s.labels.get("namespace", ""): s.value for s in query(q["pending"])}
        p90 = {s.labels.get("namespace", ""): s.value for s in query(q["wait_p90"]) if s.value.is_finite()}
        mean = {s.labels.get("namespace", ""): s.value for s in query(q["wait_mean"]) if s.value.is_finite()}
    except (TransientError, PermanentError) as exc:  # this cluster's state, shown on its rows only
        # In words, not the exception's text: that carries urllib3's pool repr (internal hosts and ports).
        reason = "query refused" if isinstance(exc, PermanentError) else connection_reason(exc)
        return ClusterSamples(error=f"metrics unavailable: {reason}")
    return ClusterSamples(usage=usage, pending=pending, wait_p90=p90, wait_mean=mean)


# --- the edge: database rows and metric sources ------------------------------------------------------------


def collect(tenants: Any, at: datetime, *, client_for: Callable[[str], Any] | None = None) -> list[QueueRow]:
    """The queue view of `tenants` (a queryset already scoped to the caller) at `at`."""

    rows = [p for p in Placement.objects.filter(tenant__in=tenants).select_related("tenant", "cluster")
            if not leaving(p)]  # a removed placement being pruned is no longer the tenant's there
    placements = [PlacementFact(p.tenant.slug, p.cluster.name, p.home) for p in rows]
    quotas = [QuotaFact(q.tenant.slug, q.flavor.name, q.cluster.name, q.nominal, q.borrowing_limit) for q in
              Quota.objects.filter(tenant__in=tenants).select_related("tenant", "flavor", "cluster")]
    resources = {f.name: f.resource_name for f in Flavor.objects.all()}
    make = client_for or metrics.client_at
    clusters = {p.cluster for p in rows}
    samples: dict[str, ClusterSamples] = {}
    for cluster in sorted(clusters, key=lambda c: c.name):
        url = metrics.url_of(cluster)
        if not url:
            samples[cluster.name] = ClusterSamples(error="no metrics source configured")
            continue
        if client_for is None and (reason := metrics_source.probe(url)):
            # One short probe per source (remembered), not four queries with retries per cluster.
            samples[cluster.name] = ClusterSamples(error=f"metrics source not reachable ({reason})")
            continue
        client = make(url)
        samples[cluster.name] = read_cluster(lambda promql, c=client: c.instant(promql, at), cluster.metrics_label)
    return build_rows(quotas, placements, samples, resources)


# --- admission wait over time (the queue page's chart) -----------------------------------------------------


def wait_points(series: Iterable[Any], start: datetime, hours: int, tenant_of: Mapping[str, str]) -> dict[str, list]:
    """Pure: p90 admission wait per tenant and hour from a range answer (`series` with a `namespace` label,
    samples at start + k hours); hours without a finite value are gaps (None). Namespaces not in `tenant_of`
    (not a placed tenant's there) are left out."""
    out: dict[str, list[Decimal | None]] = {}
    begin = Decimal(int(start.timestamp()))
    for s in series:
        tenant = tenant_of.get(s.labels.get("namespace", ""))
        if tenant is None:
            continue
        points = out.setdefault(tenant, [None] * (hours + 1))
        for sample in s.samples:
            index = int((sample.timestamp - begin) / 3600)
            if 0 <= index <= hours and sample.value.is_finite():
                points[index] = sample.value.quantize(Decimal("0.1"))
    return out


def wait_history(tenants: Any, at: datetime, *, hours: int = 24,
                 client_for: Callable[[str], Any] | None = None) -> tuple[list[datetime], dict[str, list]]:
    """The hourly p90 admission wait (s) of each visible tenant's queue over the last `hours`, per cluster
    ("tenant on cluster" when it is placed on several). A cluster whose source does not answer is left out
    (the page shows the outage once)."""
    from datetime import timedelta


    end = at.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=hours)
    rows = [p for p in Placement.objects.filter(tenant__in=tenants).select_related("tenant", "cluster")
            if not leaving(p)]
    several = {p.tenant.slug for p in rows if sum(q.tenant_id == p.tenant_id for q in rows) > 1}
    history: dict[str, list] = {}
    for cluster in sorted({p.cluster for p in rows}, key=lambda c: c.name):
        url = metrics.url_of(cluster)
        if not url or (client_for is None and metrics_source.probe(url)):
            continue
        client = (client_for or metrics.client_at)(url)
        tenant_of = {namespace_of(p.tenant.slug): (f"{p.tenant.slug} on {cluster.name}" if p.tenant.slug in several
                                                   else p.tenant.slug) for p in rows if p.cluster == cluster}
        try:
            answer = client.range(queries(cluster.metrics_label)["wait_p90"], start, end, 3600)
        except (TransientError, PermanentError):
            continue
        history.update(wait_points(answer, start, hours, tenant_of))
    return [start + timedelta(hours=i) for i in range(hours + 1)], dict(sorted(history.items()))
