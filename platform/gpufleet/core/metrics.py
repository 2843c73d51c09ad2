"""Where a cluster's metrics are read: the one factory every TSDB reader uses.

Billing's collector, fleet operations, the queue view, node health and the metrics-source probe all ask here
for a cluster's metrics source: the cluster's own `metrics_url` (scheduling.clusters.models.Cluster), else the
platform's `GPUFLEET_METRICS_URL`. Before this, node health read the environment and ignored a cluster's own
source. The query dialect (`GPUFLEET_METRICS_DIALECT`) is chosen here too, once for every reader.
"""

from __future__ import annotations

from typing import Protocol

from django.core.exceptions import ImproperlyConfigured

from infra.metrics import MetricsClient

from . import conf

# The query language of the metrics source: VictoriaMetrics' MetricsQL (fewer rollups per measurement; the
# default) or plain PromQL for any Prometheus-API TSDB. Both compute the same numbers (billing.metering.promql).
METRICSQL, PROMQL = "metricsql", "promql"
DIALECTS = (METRICSQL, PROMQL)


class HasMetricsSource(Protocol):
    """A cluster as far as its metrics are concerned (scheduling.clusters.models.Cluster is one)."""

    metrics_url: str


def platform_url() -> str:
    """The platform's shared metrics source ("" when not configured)."""
    return conf.METRICS_URL


def url_of(cluster: HasMetricsSource | None = None) -> str:
    """The metrics source of `cluster`: its own `metrics_url`, else the platform's (None: the platform's)."""
    own = cluster.metrics_url if cluster is not None else ""
    return own or platform_url()


def client_at(url: str) -> MetricsClient:
    """A client of the metrics source at `url` (the clients of every reader are built here)."""
    return MetricsClient(url)


def client(cluster: HasMetricsSource | None = None) -> MetricsClient:
    """A client of `cluster`'s metrics source (`url_of`)."""
    return client_at(url_of(cluster))


def dialect() -> str:
    """The configured query dialect, one of DIALECTS."""
    value = conf.METRICS_DIALECT or METRICSQL
    if value not in DIALECTS:
        raise ImproperlyConfigured(f"GPUFLEET_METRICS_DIALECT must be one of {', '.join(DIALECTS)}, not {value!r}")
    return value
