"""Capacity signals from Kueue metrics: rendered as PrometheusRule/VMRule (valid against the upstream
CRDs, in `render --platform`) and evaluated by the platform itself in a real VictoriaMetrics."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import yaml
from django.core.management import call_command

from infra.metrics import MetricsClient
from infra.schemas import SchemaRegistry
from scheduling import actions as scheduling_actions
from scheduling.fleetops import queues, service
from scheduling.fleetops.models import FleetSettings
from scheduling.models import ClusterFlavor, Flavor, GpuModel, default_cluster_id
from tests.support import factories
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db

NOW = (datetime.now(UTC) - timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
BUCKETS = ("1", "2.5", "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240",
           "20480", "40960", "+Inf")


@pytest.fixture
def catalog(db):  # type: ignore[no-untyped-def]
    model = GpuModel.objects.create(name="h100", dcgm_model_name="NVIDIA H100 80GB HBM3", memory_mib=81559)
    h100 = Flavor.objects.create(name="h100", gpu_model=model, mode="whole", weight=1, capacity=10)
    Flavor.objects.create(name="h100-3g", gpu_model=model, mode="mig", mig_profile="3g.40gb", capacity=14)
    # Offered where the tenants are placed (`default`), as create_flavor() does: quotas are checked per cluster.
    ClusterFlavor.objects.create(cluster_id=default_cluster_id(), flavor=h100, capacity=10)
    for slug in ("acme", "bravo"):
        tenant = factories.tenant(slug, phase="ready")
        scheduling_actions.set_quota(tenant, flavor="h100", nominal=4)


def wait_lines(queue: str, wait_seconds: int, count: int, start: datetime, minutes: int) -> list[str]:
    """A cumulative admission-wait histogram: `count` workloads per minute, each waiting `wait_seconds`."""
    out = []
    for i in range(minutes + 1):
        t = int((start + timedelta(minutes=i)).timestamp() * 1000)
        for le in BUCKETS:
            inside = le == "+Inf" or Decimal(le) >= wait_seconds
            value = count * i if inside else 0
            out.append(f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="{queue}",priority_class="",'
                       f'replica_role="leader",le="{le}"}} {value} {t}')
        out.append(f'kueue_pending_workloads{{cluster_queue="{queue}",status="active",replica_role="leader"}} 3 {t}')
    return out


def usage_lines(flavor: str, resource: str, value: int, start: datetime, days: int) -> list[str]:
    return [f'kueue_cluster_queue_resource_usage{{cohort="",cluster_queue="tenant-acme",flavor="{flavor}",'
            f'resource="{resource}",replica_role="leader"}} {value} '
            f'{int((start + timedelta(minutes=5 * i)).timestamp() * 1000)}' for i in range(days * 288 + 1)]


def test_rules_render_valid_for_both_operators(catalog, settings) -> None:  # type: ignore[no-untyped-def]
    registry = SchemaRegistry(need_reference())
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True  # Kueue scraped: the rules are rendered (fleetops.render)
    for kind in ("PrometheusRule", "VMRule"):
        fleet = FleetSettings.current()
        fleet.rule_kind = kind
        fleet.save()
        out = io.StringIO()
        call_command("render", "--platform", stdout=out)
        docs = [d for d in yaml.safe_load_all(out.getvalue()) if d and d.get("kind") == kind]
        assert len(docs) == 1
        rule = docs[0]
        assert registry.validate([rule]) == []
        alerts = {(r["alert"], r["labels"]["flavor"]) for r in rule["spec"]["groups"][0]["rules"]}
        assert alerts == {("GpuFleetAddCapacity", "h100"), ("GpuFleetExpansionReview", "h100"),
                          ("GpuFleetAddCapacity", "h100-3g"), ("GpuFleetExpansionReview", "h100-3g")}
        assert 'cluster_queue=~"tenant-acme|tenant-bravo"' in rule["spec"]["groups"][0]["rules"][0]["expr"]


def test_signals_evaluated_in_victoriametrics(catalog, metrics) -> None:  # type: ignore[no-untyped-def]
    start = NOW - timedelta(days=30)
    # acme's workloads wait ~40 min (bucket 2560 s) for the last hour: above 30 min. bravo's wait 30 s.
    metrics.import_prometheus([*wait_lines("tenant-acme", 2400, 2, NOW - timedelta(hours=1), 60),
                               *wait_lines("tenant-bravo", 30, 2, NOW - timedelta(hours=1), 60),
                               *usage_lines("h100", "nvidia.com/gpu", 9, start, 30)])
    signals = service.capacity_signals(NOW, MetricsClient(metrics.url))
    kinds = {(s.kind, s.flavor) for s in signals}
    assert kinds == {("add-capacity", "h100"), ("expansion-review", "h100")}
    review = next(s for s in signals if s.kind == "expansion-review")
    assert review.value == Decimal("0.9") and "9.0 of 10 units" in review.message
    wait = next(s for s in signals if s.kind == "add-capacity")
    assert Decimal(1800) < wait.value <= Decimal(2560)
    # Below the thresholds: nothing.
    fleet = FleetSettings.current()
    fleet.queue_wait_seconds, fleet.allocation_ratio = 3000, Decimal("0.95")
    fleet.save()
    assert service.capacity_signals(NOW, MetricsClient(metrics.url)) == []
    per_queue = queues.wait_by_queue(MetricsClient(metrics.url), NOW)
    assert per_queue["tenant-bravo"]["p90_wait_seconds"] <= 40
    assert per_queue["tenant-acme"]["pending_workloads"] == 3


def test_one_tenants_reconcile_does_not_read_the_fleets_queue_list(catalog, settings, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The rules list every tenant's ClusterQueue (every quota of the fleet): only the platform's render reads
    them, so a single tenant's reconcile must not load them -- but the platform, rendered from such a tenant's
    context (an approve reconciles the platform first), must still get exactly the full rules."""
    from tenants import reconcile
    from tenants.models import Tenant
    from tenants.render import RenderContext, render_platform, with_platform_inputs
    from tests.support.services import need_binary

    need_reference()
    need_binary("git")
    settings.GPUFLEET_BACKEND = "gitops"
    settings.GPUFLEET_GITOPS_REPO = str(tmp_path / "gitops")
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True  # Kueue scraped: the rules are rendered (fleetops.render)
    full = render_platform(RenderContext.from_settings())
    assert any(m["kind"] == "PrometheusRule" for m in full)
    tenants_only = RenderContext.from_settings(tenants_only=True)
    with pytest.raises(ValueError):
        render_platform(tenants_only)  # never a platform without its rules (they would be pruned)
    assert render_platform(with_platform_inputs(tenants_only)) == full

    loads: list[int] = []
    original = service.flavor_queues
    monkeypatch.setattr(service, "flavor_queues", lambda: loads.append(1) or original())
    outcome = reconcile.reconcile_tenant(Tenant.objects.get(slug="acme").pk)
    assert outcome.phase == "ready" and loads == []
    reconcile.reconcile_platform()
    assert loads == [1]


def stalled_lines(queue: str, start: datetime, minutes: int, admitted_before: int = 5) -> list[str]:
    """A ClusterQueue where nothing is admitted: the histogram does not move (all increases 0) while 3 wait."""
    out = []
    for i in range(minutes + 1):
        t = int((start + timedelta(minutes=i)).timestamp() * 1000)
        out.extend(f'kueue_admission_wait_time_seconds_bucket{{cluster_queue="{queue}",priority_class="",'
                   f'replica_role="leader",le="{le}"}} {admitted_before} {t}' for le in BUCKETS)
        out.append(f'kueue_pending_workloads{{cluster_queue="{queue}",status="active",replica_role="leader"}} 3 {t}')
    return out


def test_a_queue_that_admits_nothing_raises_add_capacity(catalog, metrics) -> None:  # type: ignore[no-untyped-def]
    """Zero admissions in the window make histogram_quantile NaN (all bucket increases are 0); NaN > x is
    false, so the stuck queue -- the case the alert exists for -- used to stay silent."""
    metrics.import_prometheus(stalled_lines("tenant-acme", NOW - timedelta(hours=2), 120))
    signals = service.capacity_signals(NOW, MetricsClient(metrics.url))
    assert [(s.kind, s.flavor, s.value) for s in signals] == [("add-capacity", "h100", Decimal(1800))]


def test_a_queue_pending_only_briefly_is_not_stalled(catalog, metrics) -> None:  # type: ignore[no-untyped-def]
    """A workload that arrived 10 minutes ago in an idle queue has not waited the threshold."""
    metrics.import_prometheus(stalled_lines("tenant-acme", NOW - timedelta(minutes=10), 10))
    assert service.capacity_signals(NOW, MetricsClient(metrics.url)) == []
