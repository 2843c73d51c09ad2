"""Node health reads its cluster's metrics source: the cluster's own `metrics_url`, else the platform's
GPUFLEET_METRICS_URL (before gpufleet.core.metrics it read the environment's and ignored the cluster's)."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from billing import metrics_source
from infra.kube.nodes import ClusterOps
from scheduling.clusters.models import Cluster
from scheduling.nodehealth import kube as nodehealth_kube
from scheduling.nodehealth.summary import health_summary
from tests.support.services import free_port
from tests.support.victoriametrics import VictoriaMetrics

pytestmark = pytest.mark.django_db


@pytest.fixture
def emulated_cluster(kube, kube_backend, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cluster side: the Kubernetes emulator (no GPU nodes); the metrics side is what the test is about.
    monkeypatch.setattr(nodehealth_kube, "cluster_ops", lambda: ClusterOps(kube_backend))
    cache.clear()  # remembered probes and the cached summary of other tests


def _own_source(url: str) -> None:
    Cluster.objects.update_or_create(name=nodehealth_kube.CLUSTER, defaults={"metrics_url": url})


def test_the_clusters_own_source_is_read_not_the_platforms(victoria: VictoriaMetrics, emulated_cluster, settings,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    settings.GPUFLEET_METRICS_URL = dead
    monkeypatch.setenv("GPUFLEET_METRICS_URL", dead)  # what node health used to read
    _own_source(victoria.url)

    assert nodehealth_kube.metrics_client_url() == victoria.url
    assert nodehealth_kube.metrics_client().probe() == ""
    summary = health_summary(fresh=True)
    assert "outage" not in summary and summary["error"] == ""
    assert summary["total"] == 0  # assessed: the emulator has no GPU node


def test_without_its_own_source_the_platforms_is_read(victoria: VictoriaMetrics, emulated_cluster,
                                                       settings) -> None:
    settings.GPUFLEET_METRICS_URL = victoria.url
    _own_source("")

    assert nodehealth_kube.metrics_client_url() == victoria.url
    summary = health_summary(fresh=True)
    assert "outage" not in summary and summary["error"] == ""


def test_its_own_source_down_is_named_as_the_clusters(victoria: VictoriaMetrics, emulated_cluster,
                                                       settings) -> None:
    settings.GPUFLEET_METRICS_URL = victoria.url
    _own_source(f"http://127.0.0.1:{free_port()}")

    outage = health_summary(fresh=True)["outage"]
    assert isinstance(outage, metrics_source.Outage)
    assert outage.source == f"cluster {nodehealth_kube.CLUSTER}" and outage.cluster == nodehealth_kube.CLUSTER
    assert outage.reason == "connection refused"
