"""The one queue view: Kueue's LocalQueue metrics from several clusters (a real VictoriaMetrics, series told
apart by the `cluster` external label) joined with quotas and placements per tenant x flavor x cluster."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from infra.metrics import MetricsClient
from scheduling.fleetops import queue_view as qv
from tests.support.services import free_port
from tests.support.victoriametrics import VictoriaMetrics

AT = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("queue-view-vm")))
    yield vm
    vm.stop()


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def series(name: str, labels: dict[str, str], value: float, at: datetime) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value} {ms(at)}"


def kueue_lines(cluster: str, namespace: str, *, gpus: float, pending: int, local_queue: str = "gpu") -> list[str]:
    base = {"cluster": cluster, "namespace": namespace, "replica_role": "standalone"}
    lines = [series("kueue_local_queue_resource_usage",
                    {**base, "name": local_queue, "flavor": "h100", "resource": "nvidia.com/gpu"}, gpus, AT),
             # cpu of the same queue is not a GPU flavor's counting resource: never counted
             series("kueue_local_queue_resource_usage",
                    {**base, "name": local_queue, "flavor": "gpufleet-host", "resource": "cpu"}, 96, AT),
             series("kueue_local_queue_pending_workloads", {**base, "name": "gpu", "status": "active"}, pending, AT),
             series("kueue_local_queue_pending_workloads", {**base, "name": "gpu", "status": "inadmissible"}, 1, AT)]
    hist = "kueue_local_queue_admission_wait_time_seconds"
    for at, (b10, b60, inf, total) in ((AT - timedelta(minutes=50), (0, 0, 0, 0)), (AT, (9, 10, 10, 200))):
        for le, count in (("10", b10), ("60", b60), ("+Inf", inf)):
            lines.append(series(f"{hist}_bucket", {**base, "name": "gpu", "priority_class": "", "le": le}, count, at))
        lines.append(series(f"{hist}_sum", {**base, "name": "gpu", "priority_class": ""}, total, at))
        lines.append(series(f"{hist}_count", {**base, "name": "gpu", "priority_class": ""}, inf, at))
    return lines


def test_each_cluster_reads_only_its_own_series(victoria: VictoriaMetrics) -> None:
    victoria.import_prometheus([*kueue_lines("training", "tenant-acme", gpus=6, pending=3),
                                *kueue_lines("inference", "tenant-acme", gpus=2, pending=0),
                                *kueue_lines("inference", "tenant-zeta", gpus=1, pending=5)])
    client = MetricsClient(victoria.url)
    training = qv.read_cluster(lambda q: client.instant(q, AT), "training")
    inference = qv.read_cluster(lambda q: client.instant(q, AT), "inference")
    assert training.error == inference.error == ""
    assert training.usage[("tenant-acme", "gpu", "h100", "nvidia.com/gpu")] == 6
    assert inference.usage[("tenant-acme", "gpu", "h100", "nvidia.com/gpu")] == 2
    assert training.pending == {"tenant-acme": 4}
    assert inference.pending == {"tenant-acme": 1, "tenant-zeta": 6}
    assert training.wait_mean["tenant-acme"] == 20
    assert Decimal(0) < training.wait_p90["tenant-acme"] <= 10

    quotas = [qv.QuotaFact("acme", "h100", "training", 8, 2), qv.QuotaFact("acme", "h100", "inference", 2),
              qv.QuotaFact("acme", "a100", "inference", 4)]
    # zeta is not placed on inference: its namespace's series there are not zeta's (nor anyone's).
    placements = [qv.PlacementFact("acme", "training", home=True), qv.PlacementFact("acme", "inference"),
                  qv.PlacementFact("zeta", "training", home=True)]
    rows = qv.build_rows(quotas, placements, {"training": training, "inference": inference},
                         {"h100": "nvidia.com/gpu", "a100": "nvidia.com/gpu"})
    table = {(r.tenant, r.flavor, r.cluster): (r.nominal, r.admitted, r.pending_workloads) for r in rows}
    assert table == {
        ("acme", "a100", "inference"): (4, 0, 1),
        ("acme", "h100", "inference"): (2, 2, 1),
        ("acme", "h100", "training"): (8, 6, 4),
    }
    assert next(r for r in rows if r.cluster == "training").home is True


def test_an_unreadable_cluster_marks_its_rows_and_not_the_others(victoria: VictoriaMetrics) -> None:
    victoria.import_prometheus(kueue_lines("training", "tenant-acme", gpus=6, pending=3))
    good = MetricsClient(victoria.url)
    dead = MetricsClient(f"http://127.0.0.1:{free_port()}")
    samples = {"training": qv.read_cluster(lambda q: good.instant(q, AT), "training"),
               "inference": qv.read_cluster(lambda q: dead.instant(q, AT), "inference")}
    assert samples["inference"].error.startswith("metrics unavailable")
    rows = qv.build_rows([qv.QuotaFact("acme", "h100", "training", 8), qv.QuotaFact("acme", "h100", "inference", 2)],
                         [qv.PlacementFact("acme", "training", True), qv.PlacementFact("acme", "inference")],
                         samples, {"h100": "nvidia.com/gpu"})
    by_cluster = {r.cluster: r for r in rows}
    assert by_cluster["training"].admitted == 6 and by_cluster["training"].metrics_error == ""
    assert by_cluster["inference"].admitted is None and by_cluster["inference"].pending_workloads is None
    assert by_cluster["inference"].nominal == 2  # the quota is still shown


def test_dispatch_mirror_on_the_home_cluster_is_not_counted_twice() -> None:
    usage = {("tenant-acme", "gpu-dispatch", "h100", "nvidia.com/gpu"): Decimal(4),
             ("tenant-acme", "gpu", "h100", "nvidia.com/gpu"): Decimal(1)}
    worker = {("tenant-acme", "gpu-dispatch", "h100", "nvidia.com/gpu"): Decimal(4)}
    rows = qv.build_rows([], [qv.PlacementFact("acme", "home", True), qv.PlacementFact("acme", "worker")],
                         {"home": qv.ClusterSamples(usage=usage), "worker": qv.ClusterSamples(usage=worker)},
                         {"h100": "nvidia.com/gpu"})
    assert {r.cluster: r.admitted for r in rows} == {"home": 1, "worker": 4}


def test_selector_narrows_to_the_cluster_label_and_escapes_it() -> None:
    assert qv.selector("") == '{namespace=~"tenant-.+"}'
    assert qv.selector('a"b') == '{cluster="a\\"b", namespace=~"tenant-.+"}'


def test_wait_history_points_per_tenant_and_hour_from_a_real_range_query(victoria: VictoriaMetrics) -> None:
    """The queue page's chart: the hourly p90 admission wait of each placed tenant's queue (issue 28)."""
    victoria.import_prometheus([*kueue_lines("training", "tenant-acme", gpus=6, pending=3),
                                *kueue_lines("training", "tenant-stranger", gpus=1, pending=0)])
    client = MetricsClient(victoria.url)
    start = AT - timedelta(hours=2)
    answer = client.range(qv.queries("training")["wait_p90"], start, AT, 3600)
    points = qv.wait_points(answer, start, 2, {"tenant-acme": "acme"})
    assert set(points) == {"acme"}  # the namespace of no placed tenant is nobody's
    assert points["acme"][0] is None  # no histogram yet two hours ago: a gap, not a zero
    assert points["acme"][2] is not None and Decimal(0) < points["acme"][2] <= 10  # 9 of 10 waits within 10 s
