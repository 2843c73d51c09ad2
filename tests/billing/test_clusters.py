"""Billing across host clusters: usage per cluster (only where the tenant is placed), prices per cluster,
invoice lines and exports with the cluster and its region.

Timeline for the end-to-end test (30 s scrapes, 7 s phase; three clusters in one VictoriaMetrics, told
apart by their vmagents' `cluster` external label), worked out by hand:
  training  (label train-eu)  acme  whole A100 GPU-0  08-10 10:00-11:00        -> 3600 s
  inference (label infer-us)  acme  whole A100 GPU-0  08-10 10:00-10:30        -> 1800 s (same UUID, other GPU)
  inference                   beta  MIG 3g.40gb       08-10 10:30-11:00        -> 1800 unit-s, x 0.4286 = 771.480
  dev       (label dev-u)     beta  whole A100 GPU-5  08-10 10:00-10:10        ->  600 s, but beta is not
                                                                                  placed on dev: not billed
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command

from billing import actions, collect, exports, invoicing
from billing.models import Invoice, UsageRecord
from gpufleet.core.errors import ActionError
from scheduling.models import Cluster, Flavor, GpuModel, Placement, default_cluster_id
from tests.billing.helpers import catalog, hour, sample, tenants
from tests.support import factories
from tests.support.dcgm_series import Gpu, Hold, Timeline, lines

pytestmark = pytest.mark.django_db

A100 = "NVIDIA A100 80GB PCIe"
D = Decimal


def _clusters() -> dict[str, Cluster]:
    return {
        "training": Cluster.objects.create(name="training", purpose="training", metrics_label="train-eu",
                                           region="eu-west-1", region_name="Europe (Ireland)", zones=[]),
        "inference": Cluster.objects.create(name="inference", purpose="inference", metrics_label="infer-us",
                                            region="us-east-1", region_name="US East (N. Virginia)",
                                            zones=["us-east-1a"]),
        "dev": Cluster.objects.create(name="dev", purpose="dev", metrics_label="dev-u", region="eu-central-1",
                                      region_name="Europe (Frankfurt)", zones=["eu-central-1a", "eu-central-1b"],
                                      trust_levels=["untrusted"]),
    }


def _place(tenant, *clusters: Cluster) -> None:
    for cluster in clusters:
        Placement.objects.get_or_create(tenant=tenant, cluster=cluster)


def test_usage_is_stored_per_cluster_and_only_where_the_tenant_is_placed():
    flavors = catalog()
    acme, beta = tenants("acme", "beta")
    c = _clusters()
    _place(acme, c["training"], c["inference"])
    _place(beta, c["training"])
    at = hour(2026, 10, 5, 10)
    s = [
        actions.Sample("acme", "a100", at, D(3600), D(3600), "training"),
        actions.Sample("acme", "a100", at, D(1800), D(1800), "inference"),  # same tenant, flavor, hour
        actions.Sample("beta", "a100", at, D(900), D(900), "training"),
        actions.Sample("beta", "a100", at, D(600), D(600), "inference"),  # the same namespace, not placed
        actions.Sample("beta", "a100", at, D(60), D(60), "nowhere"),
        sample("acme", flavors["a100"], at, "120"),  # no cluster: the default cluster (acme's home)
    ]
    run = actions.store_usage(hour(2026, 10, 5, 0), hour(2026, 10, 6, 0), s)
    stored = {(r.tenant.slug, r.cluster.name): r.unit_seconds
              for r in UsageRecord.objects.select_related("tenant", "cluster")}
    assert stored == {("acme", "training"): D(3600), ("acme", "inference"): D(1800), ("beta", "training"): D(900),
                      ("acme", "default"): D(120)}
    assert run.skipped == {"clusters": ["nowhere"], "unplaced": ["beta on inference"]}
    assert run.records == 4 and run.unit_seconds == D(6420)


@pytest.mark.service
@pytest.mark.parametrize("dialect", ["metricsql", "promql"])
def test_collect_splits_a_shared_tsdb_by_cluster_exactly(victoria, settings, dialect):
    """The real VictoriaMetrics, three clusters with one metrics source, the same namespace and GPU UUID
    on two of them: usage per tenant x flavor x cluster x hour, exact to the second, in either query dialect
    (GPUFLEET_METRICS_DIALECT)."""
    settings.GPUFLEET_METRICS_URL = victoria.url
    settings.GPUFLEET_METRICS_DIALECT = dialect
    model = GpuModel.objects.create(name="a100-80gb-pcie", dcgm_model_name=A100, memory_mib=81920)
    Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=4)
    Flavor.objects.create(name="a100-3g", gpu_model=model, mode="mig", mig_profile="3g.40gb", weight="0.4286",
                          capacity=2)
    acme, beta = tenants("acme", "beta")
    c = _clusters()
    # The upgraded installation's `default` cluster shares the source too: it needs a label of its own.
    Cluster.objects.filter(name="default").update(metrics_label="default")
    _place(acme, c["training"], c["inference"])
    _place(beta, c["inference"])

    def scraped_by(label: str) -> tuple[dict[str, str], ...]:
        return ({"instance": "10.0.0.1:9400", "job": "dcgm-exporter", "cluster": label},)

    def at(h: int, m: int = 0) -> datetime:
        return datetime(2025, 8, 10, h, m, tzinfo=UTC)

    t = Timeline(at(9), at(12))
    t.gpus = [
        Gpu("GPU-0", A100, (Hold("tenant-acme", "train", at(10), at(11)),), replicas=scraped_by("train-eu")),
        Gpu("GPU-0", A100, (Hold("tenant-acme", "train", at(10), at(10, 30)),), replicas=scraped_by("infer-us")),
        Gpu("GPU-1", A100, (Hold("tenant-beta", "serve", at(10, 30), at(11)),), index=1, mig_profile="3g.40gb",
            mig_id="1", replicas=scraped_by("infer-us")),
        Gpu("GPU-5", A100, (Hold("tenant-beta", "try", at(10), at(10, 10)),), index=5, replicas=scraped_by("dev-u")),
    ]
    victoria.delete_all()
    victoria.import_prometheus(lines(t))
    run = collect.collect(at(9), at(12))
    stored = {(r.tenant.slug, r.flavor.name, r.cluster.name, r.hour.hour): (r.unit_seconds, r.gpu_equivalent_seconds)
              for r in UsageRecord.objects.select_related("tenant", "flavor", "cluster")}
    assert stored == {
        ("acme", "a100", "training", 10): (D(3600), D(3600)),
        ("acme", "a100", "inference", 10): (D(1800), D(1800)),
        ("beta", "a100-3g", "inference", 10): (D(1800), D("771.480")),
    }
    assert run.skipped == {"unplaced": ["beta on dev"]}
    # placed on dev as well: the same namespace's usage there becomes beta's
    _place(beta, c["dev"])
    collect.collect(at(9), at(12))
    assert UsageRecord.objects.get(tenant=beta, cluster=c["dev"]).unit_seconds == D(600)


def test_a_shared_source_without_cluster_labels_is_refused(settings):
    settings.GPUFLEET_METRICS_URL = "http://127.0.0.1:9"  # never reached: refused before any query
    catalog()
    # Two clusters share the platform's source: `default` (which a transactional test before this one may
    # have flushed, so made again here) and `training`, neither labelled.
    default_cluster_id()
    Cluster.objects.create(name="training", metrics_label="")
    with pytest.raises(ActionError) as caught:
        collect.collect(hour(2026, 10, 5, 0), hour(2026, 10, 5, 1))
    assert "clusters" in caught.value.errors
    assert UsageRecord.objects.count() == 0


@pytest.fixture
def billed():
    """acme used a100 on training (every-cluster price 2.00) and inference (its own price 3.00) in Oct 2026."""
    flavors = catalog()
    (acme,) = tenants("acme")
    c = _clusters()
    _place(acme, c["training"], c["inference"])
    actions.set_price("a100", "2.00", "USD", "2026-01-01")
    actions.set_price("a100", "3.00", "USD", "2026-01-01", cluster="inference")
    actions.set_price("a100-3g", "0.90", "USD", "2026-01-01")
    at = hour(2026, 10, 5, 10)
    actions.store_usage(hour(2026, 10, 1), hour(2026, 11, 1), [
        actions.Sample("acme", "a100", at, D("7200.000"), D("7200.000"), "training"),
        actions.Sample("acme", "a100", at, D("1801.500"), D("1801.500"), "inference"),
        actions.Sample("acme", "a100-3g", at, D("3600.000"), D("1542.960"), "inference"),
    ])
    return acme, c, flavors


def test_a_clusters_own_price_wins_and_lines_carry_cluster_and_region(billed):
    acme, c, _ = billed
    invoice = actions.draft_invoice(acme, "2026-10")
    got = [(ln.flavor_name, ln.cluster_name, ln.region, ln.region_name, ln.availability_zone, ln.unit_price,
            ln.amount) for ln in invoice.lines.order_by("position")]
    assert got == [
        ("a100", "inference", "us-east-1", "US East (N. Virginia)", "us-east-1a", D("3.000000"), D("1.50")),
        ("a100", "training", "eu-west-1", "Europe (Ireland)", "", D("2.000000"), D("4.00")),
        ("a100-3g", "inference", "us-east-1", "US East (N. Virginia)", "us-east-1a", D("0.900000"), D("0.90")),
    ]
    # 1801.5 s x 3.00 / 3600 = 1.50125 -> 1.50; 7200 x 2.00 / 3600 = 4.00; 3600 x 0.90 / 3600 = 0.90
    assert invoice.total == D("6.40")
    assert [ln.description.split(":")[0] for ln in invoice.lines.order_by("position")] == [
        "a100 on inference", "a100 on training", "a100-3g on inference"]
    assert invoice.lines.get(position=1).cluster_id == c["inference"].pk


def test_exports_carry_cluster_region_and_zone(billed):
    acme, _, _ = billed
    invoice = actions.finalize(actions.draft_invoice(acme, "2026-10").pk)
    rows = list(csv.DictReader(io.StringIO(exports.to_focus(exports.invoices_for(invoice.period)))))
    got = [(r["x_Cluster"], r["RegionId"], r["RegionName"], r["AvailabilityZone"], r["BilledCost"]) for r in rows]
    assert got == [
        ("inference", "us-east-1", "US East (N. Virginia)", "us-east-1a", "1.50"),
        ("training", "eu-west-1", "Europe (Ireland)", "", "4.00"),
        ("inference", "us-east-1", "US East (N. Virginia)", "us-east-1a", "0.90"),
    ]
    assert rows[0]["ResourceId"] == "inference/tenant-acme/a100"
    assert json.loads(rows[1]["Tags"])["gpufleet.io/cluster"] == "training"
    assert sum(D(r["BilledCost"]) for r in rows) == invoice.total
    lines_csv = list(csv.DictReader(io.StringIO(exports.to_csv([invoice]))))
    assert [(r["cluster"], r["region"], r["availability_zone"]) for r in lines_csv] == [
        ("inference", "us-east-1", "us-east-1a"), ("training", "eu-west-1", ""),
        ("inference", "us-east-1", "us-east-1a")]
    document = json.loads(exports.to_json([invoice]))[0]
    assert [(ln["cluster"], ln["region_name"]) for ln in document["lines"]] == [
        ("inference", "US East (N. Virginia)"), ("training", "Europe (Ireland)"),
        ("inference", "US East (N. Virginia)")]
    # the content hash covers the cluster, and the finalized invoice still verifies
    header, content = actions.invoice_content(invoice)
    assert content[0]["cluster"] == "inference"
    assert invoicing.content_hash(header, content) == invoice.content_hash


def test_region_snapshot_survives_a_cluster_moving(billed):
    acme, c, _ = billed
    invoice = actions.finalize(actions.draft_invoice(acme, "2026-10").pk)
    Cluster.objects.filter(pk=c["inference"].pk).update(region="us-west-2", region_name="US West (Oregon)")
    rows = list(csv.DictReader(io.StringIO(exports.to_focus(exports.invoices_for(invoice.period)))))
    assert rows[0]["RegionId"] == "us-east-1"


def test_adjustments_are_per_cluster(billed):
    acme, _, _ = billed
    actions.finalize(actions.draft_invoice(acme, "2026-10").pk)
    # a late re-collection of October finds 3600 s more on inference only
    at = hour(2026, 10, 5, 10)
    actions.store_usage(hour(2026, 10, 5, 10), hour(2026, 10, 5, 11), [
        actions.Sample("acme", "a100", at, D("7200.000"), D("7200.000"), "training"),
        actions.Sample("acme", "a100", at, D("5401.500"), D("5401.500"), "inference"),
        actions.Sample("acme", "a100-3g", at, D("3600.000"), D("1542.960"), "inference"),
    ])
    actions.store_usage(hour(2026, 11, 1), hour(2026, 11, 2), [
        actions.Sample("acme", "a100", hour(2026, 11, 1, 3), D(3600), D(3600), "training")])
    november = actions.draft_invoice(acme, "2026-11")
    adjustments = list(november.lines.filter(kind="adjustment"))
    assert [(a.cluster_name, a.unit_seconds, a.unit_price, a.amount) for a in adjustments] == [
        ("inference", D("3600.000"), D("3.000000"), D("3.00"))]


def test_prices_per_cluster_validation(billed):
    with pytest.raises(ActionError) as caught:
        actions.set_price("a100", "1.00", "USD", "2026-12-01", cluster="nowhere")
    assert caught.value.errors == {"cluster": ["unknown cluster 'nowhere'"]}
    # a cluster's own price overlaps only its own earlier prices
    with pytest.raises(ActionError) as caught:
        actions.set_price("a100", "1.00", "USD", "2025-06-01", cluster="inference")
    assert "effective_from" in caught.value.errors
    later = actions.set_price("a100", "2.50", "USD", "2026-12-01", cluster="training")
    assert later.cluster.name == "training"
    assert actions.Price.objects.filter(flavor__name="a100", cluster__isnull=True, effective_to__isnull=True).exists()


def test_price_api_takes_a_cluster_and_names_a_bad_one(billed, client):
    client.force_login(factories.user("finance", roles={"billing-admin"}))
    ok = client.post("/api/v1/billing/prices/", {"flavor": "a100-3g", "per_unit_hour": "1.10", "currency": "USD",
                                                 "effective_from": "2026-12-01", "cluster": "dev"},
                     content_type="application/json")
    assert ok.status_code == 201 and ok.json()["cluster"] == "dev"
    bad = client.post("/api/v1/billing/prices/", {"flavor": "a100-3g", "per_unit_hour": "1.10", "currency": "USD",
                                                  "cluster": "nowhere"}, content_type="application/json")
    assert bad.status_code == 400 and "cluster" in json.dumps(bad.json())


def test_cli_price_set_on_a_cluster(billed):
    out = io.StringIO()
    call_command("price", "set", "--flavor", "a100-3g", "--per-unit-hour", "1.20", "--currency", "USD",
                 "--from", "2026-12-01", "--cluster", "training", stdout=out)
    assert json.loads(out.getvalue())["cluster"] == "training"


def test_invoices_of_one_cluster_read_as_before(billed):
    """A single-cluster tenant's lines do not name the cluster: upgraded installations draft as before."""
    flavors = billed[2]
    (solo,) = tenants("solo")
    actions.store_usage(hour(2026, 10, 2), hour(2026, 10, 3), [
        sample("solo", flavors["a100"], hour(2026, 10, 2, 1), "3600")])
    invoice = actions.draft_invoice(solo, "2026-10")
    (line,) = invoice.lines.all()
    assert line.description.startswith("a100: 1.000000 unit-hours") and line.cluster_name == "default"
    assert Invoice.objects.filter(tenant=solo).count() == 1


def test_lines_from_stretches_between_price_changes_equal_lines_from_days(billed):
    """Drafting sums usage per stretch of days between price changes, not per day: the lines are exactly
    those of day rows, with prices changing mid-month on every cluster and on one cluster only."""
    acme, _, flavors = billed
    actions.set_price("a100", "2.20", "USD", "2026-10-10")  # every cluster (training's price) from the 10th
    actions.set_price("a100", "3.30", "USD", "2026-10-20", cluster="inference")
    actions.set_price("a100-3g", "1.10", "USD", "2026-10-25")
    start, end = hour(2026, 10, 1), hour(2026, 11, 1)
    samples = []
    for n, (flavor, cluster) in enumerate((("a100", "training"), ("a100", "inference"), ("a100-3g", "inference"))):
        weight = flavors[flavor].weight
        for h in range(n, 31 * 24, 7):
            units = D(1000 + h) + D("0.5")
            samples.append(actions.Sample("acme", flavor, start + timedelta(hours=h), units,
                                          (units * weight).quantize(D("0.001")), cluster))
    actions.store_usage(start, end, samples)
    book, places = invoicing.PriceBook(actions._price_rows("USD")), actions._places()
    stretches = actions._usage_rows([acme.pk], start, end, book)[acme.pk]
    summed: dict[tuple[int, int, datetime], list[Decimal]] = defaultdict(lambda: [D(0), D(0)])
    for r in UsageRecord.objects.filter(tenant=acme):
        day = summed[(r.flavor_id, r.cluster_id, r.hour.replace(hour=0))]
        day[0] += r.unit_seconds
        day[1] += r.gpu_equivalent_seconds
    names = {f.pk: f.name for f in flavors.values()}
    days = [invoicing.UsageRow(f, names[f], day, u, g, cluster) for (f, cluster, day), (u, g) in sorted(summed.items())]

    def lines(rows: list[invoicing.UsageRow]) -> list[tuple]:
        return [(ln.flavor_name, ln.place, ln.price_id, ln.charge_start, ln.charge_end, ln.quantity, ln.amount,
                 ln.unit_seconds, ln.gpu_equivalent_seconds, ln.description)
                for ln in invoicing.usage_lines(rows, book, start, end, "USD", places).lines]

    # the month cut on the 10th, 20th and 25th: four stretches per flavor and cluster, not ~31 days
    assert len(stretches) == 3 * 4 < len(days)
    assert lines(stretches) == lines(days)
    assert len(lines(days)) == 6  # each flavor and cluster: the price before and after its change
