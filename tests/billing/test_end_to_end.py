"""End to end on a real VictoriaMetrics: exporter-shaped series from a known timeline -> `gpufleet billing
collect` -> `billing usage --json` reproduces the GPU-seconds exactly -> invoice -> reconciliation
against an OpenCost answer in the recorded upstream shape, served over real HTTP.

Known timeline (30 s scrapes, 7 s phase), all worked out by hand:
  acme  whole A100 GPU-w0, two scraper replicas, 10-31 23:30 .. 11-01 00:30 -> 1800 s Oct + 1800 s Nov
  acme  whole A100 GPU-w1, pod restarts 22:00-22:20 then 22:20-22:40, one missed scrape -> 2400 s
  acme  HAMi share of GPU-h, max(20/80 memory, 10 % cores) = 0.25, 22:00-23:00 -> 900 s
  beta  MIG 3g.40gb instance on GPU-m, 23:00-23:20 -> 1200 unit-s, x 0.4286 = 514.320 GPU-s
  beta  whole A100 GPU-w7 from an exporter with --use-old-namespace labels, 21:00-21:30 -> 1800 s
  nobody: GPU-w2 idle with empty pod labels, GPU-w3 idle without them, GPU-w4 held by `monitoring`
  ghost: tenant-ghost is not a tenant gpufleet knows -> reported as skipped, not stored
"""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from billing.models import UsageCollection, UsageRecord
from scheduling.models import Flavor, GpuModel
from tests.metering.scripted_http import Reply, serve
from tests.support import factories
from tests.support.dcgm_series import IDLE_EMPTY, Gpu, HamiGpu, HamiShare, Hold, Timeline, lines
from tests.support.services import need_reference

pytestmark = [pytest.mark.django_db, pytest.mark.service]

A100 = "NVIDIA A100 80GB PCIe"
GIB = 1024**3
REPLICAS = ({"instance": "10.0.0.1:9400", "job": "dcgm-exporter", "prometheus_replica": "prom-0"},
            {"instance": "10.0.0.1:9400", "job": "dcgm-exporter", "prometheus_replica": "prom-1"})


def at(month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2025, month, day, hour, minute, tzinfo=UTC)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def fleet(victoria, settings):
    settings.GPUFLEET_METRICS_URL = victoria.url
    model = GpuModel.objects.create(name="a100-80gb-pcie", dcgm_model_name=A100, memory_mib=81920)
    Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=4)
    Flavor.objects.create(name="a100-3g", gpu_model=model, mode="mig", mig_profile="3g.40gb",
                          weight="0.4286", capacity=2)
    Flavor.objects.create(name="a100-share", gpu_model=model, mode="hami", memory_percent=25, cores_percent=25,
                          weight="0.25", capacity=4)
    for slug in ("acme", "beta"):
        factories.tenant(slug, "trusted", phase="ready")
    t = Timeline(at(10, 31, 21), at(11, 1, 2))
    t.gpus = [
        Gpu("GPU-w0", A100, (Hold("tenant-acme", "train-0", at(10, 31, 23, 30), at(11, 1, 0, 30)),),
            replicas=REPLICAS),
        Gpu("GPU-w1", A100, (Hold("tenant-acme", "train-1-a", at(10, 31, 22), at(10, 31, 22, 20),
                                  missed=frozenset({10})),
                             Hold("tenant-acme", "train-1-b", at(10, 31, 22, 20), at(10, 31, 22, 40))), index=1),
        Gpu("GPU-w2", A100, (), index=2, idle=IDLE_EMPTY),
        Gpu("GPU-w3", A100, (), index=3),
        Gpu("GPU-w4", A100, (Hold("monitoring", "dcgm-test", at(10, 31, 21), at(10, 31, 23)),), index=4),
        Gpu("GPU-w5", A100, (Hold("tenant-ghost", "x", at(10, 31, 21), at(10, 31, 22)),), index=5),
        Gpu("GPU-m", A100, (Hold("tenant-beta", "job-b", at(10, 31, 23), at(10, 31, 23, 20)),), index=6,
            mig_profile="3g.40gb", mig_id="1"),
        # an exporter run with --use-old-namespace (pod_namespace, pod_name, container_name)
        Gpu("GPU-w7", A100, (Hold("tenant-beta", "old-0", at(10, 31, 21), at(10, 31, 21, 30)),), index=7,
            old_label_names=True),
    ]
    t.hami = [HamiGpu("GPU-h", f"NVIDIA-{A100}", 80 * GIB, (
        HamiShare("tenant-acme", "share-a", at(10, 31, 22), at(10, 31, 23), 20 * GIB, 10),))]
    victoria.delete_all()
    victoria.import_prometheus(lines(t))
    for flavor, amount in (("a100", "2.00"), ("a100-3g", "0.90"), ("a100-share", "0.60")):
        run("price", "set", "--flavor", flavor, "--per-unit-hour", amount, "--currency", "USD", "--from", "2025-01-01")


def usage_json(tenant: str, start: str, end: str) -> list[dict]:
    return json.loads(run("billing", "usage", "--tenant", tenant, "--start", start, "--end", end, "--json"))


def test_cli_reproduces_known_gpu_seconds_then_bills_and_reconciles(fleet, settings):
    window = ("--start", "2025-10-31T21:00:00Z", "--end", "2025-11-01T02:00:00Z")
    first = json.loads(run("billing", "collect", *window))
    assert first["skipped"] == {"tenants": ["ghost"]}
    october = ("2025-10-01T00:00:00Z", "2025-11-01T00:00:00Z")
    expected_acme = [
        {"flavor": "a100", "unit_seconds": 4200, "gpu_equivalent_seconds": 4200},  # 1800 + 2400
        {"flavor": "a100-share", "unit_seconds": 900, "gpu_equivalent_seconds": 900},
    ]
    assert usage_json("acme", *october) == expected_acme
    assert usage_json("beta", *october) == [
        {"flavor": "a100", "unit_seconds": 1800, "gpu_equivalent_seconds": 1800},
        {"flavor": "a100-3g", "unit_seconds": 1200, "gpu_equivalent_seconds": 514.32}]
    assert usage_json("acme", "2025-11-01T00:00:00Z", "2025-12-01T00:00:00Z") == [
        {"flavor": "a100", "unit_seconds": 1800, "gpu_equivalent_seconds": 1800}]

    rows = UsageRecord.objects.count()
    second = json.loads(run("billing", "collect", *window))  # collecting again replaces, never adds
    assert second["replaced"] == rows == second["records"] == UsageRecord.objects.count()
    assert usage_json("acme", *october) == expected_acme
    assert UsageCollection.objects.count() == 2

    invoices = json.loads(run("billing", "invoices", "--period", "2025-10", "--finalize", "--yes"))
    totals = {i["tenant"]: i["total"] for i in invoices}
    # acme: 4200 s x 2.00/h = 2.333.. -> 2.33; 900 s x 0.60/h = 0.15
    # beta: 1800 s x 2.00/h = 1.00; 1200 s x 0.90/h = 0.30
    assert totals == {"acme": "2.48", "beta": "1.30"}

    # OpenCost (recorded newer shape) bills requests: the HAMi share as a whole GPU and no MIG at all.
    template = json.loads((need_reference() / "opencost" / "allocation-gpu.synthetic.json").read_text())
    sample = next(iter(template["data"][0].values()))
    body = {"code": 200, "status": "success", "data": [{}]}
    for namespace, gpu_hours, gpu_cost in (("tenant-acme", 2.16667, 5.41667), ("tenant-beta", 0.5, 1.25),
                                           ("kube-system", 0, 0)):
        item = copy.deepcopy(sample)
        item.update(name=namespace, gpuHours=gpu_hours, gpuCost=gpu_cost, totalCost=gpu_cost + 1)
        item["properties"] = {"namespace": namespace}
        body["data"][0][namespace] = item
    settings.GPUFLEET_RECONCILE_MIN_GPU_HOURS = "0.1"
    with serve(Reply(body=json.dumps(body))) as opencost:
        settings.GPUFLEET_OPENCOST_URL = opencost.url
        report = {r["tenant"]: r for r in json.loads(run("billing", "reconcile", "--period", "2025-10"))}
    assert opencost.requests[0]["query"]["window"] == ["2025-10-01T00:00:00Z,2025-11-01T00:00:00Z"]
    acme, beta = report["acme"], report["beta"]
    assert acme["measured_gpu_hours"] == "1.417"  # (4200 + 900) / 3600
    assert acme["flagged"] and acme["causes"] == ["hami_counted_whole"]
    assert acme["delta_gpu_hours"] == "0.750"  # 2.167 - 1.417: the share's 0.75 h billed whole
    assert beta["flagged"] and beta["causes"] == ["mig_unsupported"]
    assert set(report) == {"acme", "beta"}


class FailingAfter:
    """The real VictoriaMetrics client, except that the TSDB 'fails' after `calls` range queries."""

    def __init__(self, client, calls: int) -> None:
        self.client, self.calls = client, calls

    def range(self, query, start, end, step_seconds):
        if self.calls == 0:
            from infra.errors import TransientError

            raise TransientError("VictoriaMetrics went away", delay=5)
        self.calls -= 1
        return self.client.range(query, start, end, step_seconds)


def test_a_tsdb_failure_mid_window_changes_nothing(fleet):
    from billing import collect
    from infra.errors import TransientError

    run("billing", "collect", "--start", "2025-10-30T00:00:00Z", "--end", "2025-11-02T00:00:00Z")
    before = list(UsageRecord.objects.order_by("pk").values_list("tenant_id", "flavor_id", "hour", "unit_seconds"))
    assert before
    # Three days: the first two days' queries succeed (2 per day), the third day's fail.
    with pytest.raises(TransientError):
        collect.collect(datetime(2025, 10, 30, tzinfo=UTC), datetime(2025, 11, 2, tzinfo=UTC),
                        client=FailingAfter(collect.metrics_client(), 4))
    after = list(UsageRecord.objects.order_by("pk").values_list("tenant_id", "flavor_id", "hour", "unit_seconds"))
    assert after == before and UsageCollection.objects.count() == 1
