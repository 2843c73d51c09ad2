"""A real VictoriaMetrics shared by the metering tests; each test writes into its own year so tests
never see each other's series (VictoriaMetrics rejects far-future samples, so years are in the past)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.metrics import MetricsClient
from tests.support.victoriametrics import VictoriaMetrics

# Counting down from last year: VictoriaMetrics drops samples from the future, and 1970+ leaves room.
_years = itertools.count(2025, -1)


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("victoria-metrics")))
    yield vm
    vm.stop()


@pytest.fixture
def metrics(victoria: VictoriaMetrics) -> MetricsClient:
    return MetricsClient(victoria.url)


@pytest.fixture
def year() -> int:
    """A year no other test in this session writes to."""
    return next(_years)
