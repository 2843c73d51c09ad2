"""Several host clusters in one VictoriaMetrics, told apart by their `cluster` external label.

Expected numbers are worked out by hand from the timelines (30 s scrapes, 7 s phase): a hold
[start, end) is worth end - start seconds. The clusters deliberately share a namespace, a pod name and
GPU UUIDs: only the cluster label tells their series apart.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing.metering.promql import Queries, QuerySettings, cluster_matcher
from billing.metering.usage import ClusterSource, MeteringInputError
from tests.metering.helpers import A100, GIB, H100, at, load, run
from tests.support.dcgm_series import Gpu, HamiGpu, HamiShare, Hold, Timeline

pytestmark = pytest.mark.service

D = Decimal
CLUSTERS = (ClusterSource("training", "train-eu"), ClusterSource("inference", "infer-us"),
            ClusterSource("dev", "dev-untrusted"))


def _scrape(label: str, replica: int = 0) -> tuple[dict[str, str], ...]:
    # vmagent's -remoteWrite.label / Prometheus' external_labels add `cluster` to every series it ships.
    return ({"instance": f"10.{replica}.0.1:9400", "job": "dcgm-exporter", "cluster": label},)


def _fleet(year: int) -> Timeline:
    day = (year, 4, 1)
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [
        # the same namespace, pod and GPU UUID on two clusters: two different GPUs
        Gpu("GPU-0", H100, (Hold("tenant-acme", "train-0", at(*day, 10), at(*day, 10, 20)),),
            replicas=_scrape("train-eu")),
        Gpu("GPU-0", H100, (Hold("tenant-acme", "train-0", at(*day, 10), at(*day, 10, 5)),),
            replicas=_scrape("infer-us")),
        Gpu("GPU-1", A100, (Hold("tenant-beta", "srv", at(*day, 9, 30), at(*day, 11)),), index=1,
            mig_profile="3g.40gb", mig_id="1", replicas=_scrape("infer-us")),
        Gpu("GPU-2", H100, (Hold("tenant-gamma", "dev", at(*day, 11), at(*day, 11, 1)),), index=2,
            replicas=_scrape("dev-untrusted")),
        # a cluster gpufleet does not measure here: never counted
        Gpu("GPU-9", H100, (Hold("tenant-acme", "x", at(*day, 10), at(*day, 11)),), index=3,
            replicas=_scrape("elsewhere")),
    ]
    # GPU-0 is HAMi-managed on the dev cluster only: the whole-GPU GPU-0s of the others stay billed
    t.hami = [HamiGpu("GPU-0", f"NVIDIA-{A100}", 80 * GIB, (
        HamiShare("tenant-acme", "share", at(*day, 10), at(*day, 10, 30), 20 * GIB, 10),),
        replicas=({"instance": "10.0.0.9:31993", "cluster": "dev-untrusted"},))]
    t.gpus.append(Gpu("GPU-0", A100, (Hold("tenant-acme", "share", at(*day, 10), at(*day, 10, 30)),),
                      replicas=_scrape("dev-untrusted")))
    return t


def _by_cluster(report) -> dict[tuple[str, str, str, int], Decimal]:
    return {(s.cluster, s.tenant_slug, s.flavor, s.hour_start.hour): s.unit_seconds for s in report.samples}


@pytest.mark.parametrize("dialect", ["metricsql", "promql"])
def test_usage_splits_by_cluster_exactly(victoria, metrics, year, dialect):
    load(victoria, _fleet(year))
    day = (year, 4, 1)
    report = run(metrics, at(*day, 9), at(*day, 12), clusters=CLUSTERS, dialect=dialect)
    assert _by_cluster(report) == {
        ("training", "acme", "h100", 10): D(1200),
        ("inference", "acme", "h100", 10): D(300),
        ("inference", "beta", "a100-3g", 9): D(1800),
        ("inference", "beta", "a100-3g", 10): D(3600),
        ("dev", "gamma", "h100", 11): D(60),
        ("dev", "acme", "a100-share", 10): D(450),  # 0.25 x 1800 s, and not also a whole A100
    }
    mig = next(s for s in report.samples if s.flavor == "a100-3g" and s.hour_start.hour == 10)
    assert mig.gpu_equivalent_seconds == D("1542.960")  # 3600 x 0.4286
    # the contract's order (tenant, flavor, cluster, hour): the order of the usage table's unique index
    assert [(s.tenant_slug, s.flavor, s.cluster, s.hour_start.hour) for s in report.samples] == [
        ("acme", "a100-share", "dev", 10), ("acme", "h100", "inference", 10), ("acme", "h100", "training", 10),
        ("beta", "a100-3g", "inference", 9), ("beta", "a100-3g", "inference", 10), ("gamma", "h100", "dev", 11)]
    assert report.unmatched == []
    # all three clusters in one query per kind; the hourly method (MetricsQL's default) adds the list of
    # HAMi-managed GPUs and the per-slot query for the one here (GPU-0 on dev), still one for all clusters
    assert report.queries == (4 if dialect == "metricsql" else 2)
    per_slot = run(metrics, at(*day, 9), at(*day, 12), clusters=CLUSTERS, dialect=dialect, method="per-slot")
    assert per_slot.samples == report.samples
    assert per_slot.queries == 2


def test_each_cluster_alone_gives_its_own_numbers(victoria, metrics, year):
    load(victoria, _fleet(year))
    day = (year, 4, 1)
    together = _by_cluster(run(metrics, at(*day, 9), at(*day, 12), clusters=CLUSTERS))
    alone: dict = {}
    for cluster in CLUSTERS:
        alone |= _by_cluster(run(metrics, at(*day, 9), at(*day, 12), clusters=(cluster,)))
    assert alone == together
    only_training = run(metrics, at(*day, 9), at(*day, 12), clusters=(CLUSTERS[0],))
    assert {s.cluster for s in only_training.samples} == {"training"}


def test_a_cluster_with_its_own_source_needs_no_label(victoria, metrics, year):
    day = (year, 4, 2)
    t = Timeline(at(*day, 9), at(*day, 12))
    t.gpus = [Gpu("GPU-s", H100, (Hold("tenant-acme", "p", at(*day, 10), at(*day, 10, 10)),))]
    load(victoria, t)
    report = run(metrics, at(*day, 9), at(*day, 12), clusters=(ClusterSource("solo"),))
    assert _by_cluster(report) == {("solo", "acme", "h100", 10): D(600)}


@pytest.mark.parametrize(("clusters", "reason"), [
    ((ClusterSource("a", "x"), ClusterSource("b", "")), "need a cluster label each"),
    ((ClusterSource("a"), ClusterSource("b")), "need a cluster label each"),
    ((ClusterSource("a", "x"), ClusterSource("b", "x")), "same cluster label"),
    ((ClusterSource("a", "x"), ClusterSource("a", "y")), "distinct"),
])
def test_ambiguous_cluster_sources_are_refused_before_any_query(clusters, reason):
    class NoQueries:
        def range(self, *args):
            raise AssertionError("no query may run")

    with pytest.raises(MeteringInputError) as caught:
        run(NoQueries(), at(2020, 1, 1, 0), at(2020, 1, 1, 1), clusters=clusters)
    assert caught.value.field == "clusters" and reason in caught.value.reason


def test_cluster_label_values_are_matched_literally():
    assert cluster_matcher("cluster", ("eu.1", "a|b")) == ', cluster=~"eu\\\\.1|a\\\\|b"'
    assert cluster_matcher("cluster", ('say "hi"',)) == ', cluster="say \\"hi\\""'
    query = Queries(QuerySettings(30, 3, "DCGM_FI_DEV_FB_USED", cluster_label="cluster",
                                  cluster_values=("x", "y"))).dcgm_hourly_slots()
    assert 'cluster=~"x|y"' in query and "unless on (UUID, cluster)" in query
    assert "sum by (namespace, modelName, GPU_I_PROFILE, cluster)" in query
    plain = Queries(QuerySettings(30, 3, "DCGM_FI_DEV_FB_USED")).dcgm_hourly_slots()
    assert "cluster" not in plain
