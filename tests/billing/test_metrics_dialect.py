"""The metrics source's query dialect is one setting (GPUFLEET_METRICS_DIALECT) that every reader of the TSDB
gets from gpufleet.core.metrics: billing's collector measures in it, fleet operations query in it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from billing import collect
from billing.metering.source import PromQLUsageSource
from gpufleet.core import metrics
from scheduling.fleetops import service


def test_the_default_is_metricsql(settings) -> None:
    del settings.GPUFLEET_METRICS_DIALECT  # unset: the environment's, else the default
    assert metrics.dialect() == "metricsql"


@pytest.mark.parametrize("dialect", ["metricsql", "promql"])
def test_every_reader_uses_the_configured_dialect(settings, dialect: str) -> None:
    settings.GPUFLEET_METRICS_DIALECT = dialect
    source = collect.usage_source(metrics.client_at("http://127.0.0.1:9"))
    assert isinstance(source, PromQLUsageSource) and source.dialect == dialect
    assert service.options().dialect == dialect


def test_an_unknown_dialect_is_refused(settings) -> None:
    settings.GPUFLEET_METRICS_DIALECT = "sql"
    with pytest.raises(ImproperlyConfigured, match="GPUFLEET_METRICS_DIALECT"):
        metrics.dialect()


def test_a_clusters_own_source_comes_before_the_platforms(settings) -> None:
    settings.GPUFLEET_METRICS_URL = "http://platform:8428"

    class Cluster:
        metrics_url = ""

    assert metrics.url_of(None) == metrics.url_of(Cluster()) == "http://platform:8428"
    Cluster.metrics_url = "http://own:8428"
    assert metrics.url_of(Cluster()) == "http://own:8428"
    assert metrics.client(Cluster()).base_url == "http://own:8428"
