"""The cluster and TSDB clients node health uses (one place, so tests point them at the emulator / a real
VictoriaMetrics). Remediation always talks to the Kubernetes API directly, in GitOps mode too: the
kubeconfig in GPUFLEET_KUBECONFIG (+ GPUFLEET_KUBE_CONTEXT) or the pod's service account."""

from __future__ import annotations

from gpufleet.core import conf
from infra.kube.backend import KubernetesBackend
from infra.kube.nodes import ClusterOps
from infra.metrics import MetricsClient
from tenants.backends import kube_access


def cluster_ops() -> ClusterOps:
    return ClusterOps(KubernetesBackend.from_access(kube_access()))


def metrics_client_url() -> str:
    """The TSDB node health reads (the environment's GPUFLEET_METRICS_URL, as `metrics_client`)."""
    return conf.environment("GPUFLEET_METRICS_URL") or ""


def metrics_client() -> MetricsClient:
    return MetricsClient(metrics_client_url())
