"""Portal pages for host clusters and the one queue view: the clusters list (status: reachable, last sync,
drift), one cluster (flavors and capacity, node pools, placements) and the queue across clusters. Every
page shows only the placements and queue rows of tenants the viewer may see."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe

from billing import charts, metrics_source
from gpufleet import clock
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.core import metrics
from scheduling.clusters.models import Cluster, ClusterFlavor, Placement
from scheduling.fleetops import queue_view
from scheduling.models import GpuNodePool
from tenants.models import Tenant


@login_required
def clusters(request: HttpRequest) -> HttpResponse:
    visible = Tenant.objects.for_user(request.user)
    counts: dict[int, int] = {}
    for cluster_id in Placement.objects.filter(tenant__in=visible).values_list("cluster_id", flat=True):
        counts[cluster_id] = counts.get(cluster_id, 0) + 1
    rows = [(c, counts.get(c.pk, 0)) for c in Cluster.objects.for_user(request.user)]
    return render(request, "scheduling/clusters.html", {"clusters": rows})


@login_required
def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster.objects.for_user(request.user), name=name)
    visible = Tenant.objects.for_user(request.user)
    return render(request, "scheduling/cluster_detail.html", {
        "cluster": cluster,
        "offers": ClusterFlavor.objects.filter(cluster=cluster).select_related("flavor"),
        "pools": GpuNodePool.objects.filter(cluster=cluster).select_related("flavor"),
        "placements": Placement.objects.filter(cluster=cluster, tenant__in=visible).select_related("tenant"),
        "show_references": is_platform_admin(request.user),
        "metrics_source": metrics.url_of(cluster),
    })


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    tenants = Tenant.objects.for_user(request.user)
    rows = queue_view.collect(tenants, clock.now())
    cluster = request.GET.get("cluster", "")
    if cluster:
        rows = [r for r in rows if r.cluster == cluster]
    # One notice per metrics source that did not answer (the probe is remembered, so this costs nothing
    # more), and the other failures per cluster, in words.
    failing = {r.cluster for r in rows if "not reachable" in r.metrics_error}
    sources: dict[str, str] = {}  # one notice per source: its URL -> the first cluster reading it
    for name, url in Cluster.objects.filter(name__in=failing).order_by("name").values_list("name", "metrics_url"):
        sources.setdefault(url, name)
    outages = [o for url, name in sources.items() if (o := metrics_source.outage(url or None, cluster=name))]
    errors = sorted({(r.cluster, r.metrics_error) for r in rows
                     if r.metrics_error and "not reachable" not in r.metrics_error})
    hours, waits = queue_view.wait_history(tenants, clock.now())
    if cluster:
        waits = {k: v for k, v in waits.items() if not k.count(" on ") or k.endswith(f" on {cluster}")}
    chart = ""
    if waits:
        chart = mark_safe(charts.line_chart(  # noqa: S308 - billing.charts escapes every text
            [f"{h:%H}:00" for h in hours], waits, chart_id="queue-wait", unit="s",
            title="Admission wait (p90) per tenant, last 24 hours",
            desc="The 90th percentile of the time workloads waited for admission in each tenant's queue, per hour, "
                 "from Kueue's LocalQueue metrics."))
    return render(request, "scheduling/queue.html", {
        "rows": rows, "errors": errors, "outages": outages, "cluster": cluster, "wait_chart": chart,
        "clusters": Cluster.objects.for_user(request.user).values_list("name", flat=True),
    })
