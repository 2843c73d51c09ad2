"""The cluster and TSDB clients node health uses (one place, so tests point them at the emulator / a real
VictoriaMetrics). Remediation always talks to the Kubernetes API directly, in GitOps mode too: the
kubeconfig in GPUFLEET_KUBECONFIG (+ GPUFLEET_KUBE_CONTEXT) or the pod's service account -- the platform's
own cluster, the `default` one, whose metrics source node health reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.core import metrics
from infra.kube.backend import KubernetesBackend
from infra.kube.nodes import ClusterOps
from infra.metrics import MetricsClient
from scheduling.clusters.placement import DEFAULT_CLUSTER
from tenants.backends import kube_access

if TYPE_CHECKING:
    from scheduling.clusters.models import Cluster

# Node health's cluster: the platform's own (the one GPUFLEET_KUBECONFIG reaches).
CLUSTER = DEFAULT_CLUSTER


def cluster_ops() -> ClusterOps:
    return ClusterOps(KubernetesBackend.from_access(kube_access()))


def cluster() -> Cluster | None:
    """The cluster node health looks after (None before any exists: the platform's source is read)."""
    from scheduling.clusters.models import Cluster

    return Cluster.objects.filter(name=CLUSTER).only("name", "metrics_url").first()


def metrics_client_url() -> str:
    """The TSDB node health reads: the cluster's own metrics source, else the platform's GPUFLEET_METRICS_URL."""
    return metrics.url_of(cluster())


def metrics_client() -> MetricsClient:
    return metrics.client_at(metrics_client_url())
