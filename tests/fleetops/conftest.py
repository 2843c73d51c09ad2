"""A real VictoriaMetrics for the fleet-operations tests (one per session, its own storage)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.victoriametrics import VictoriaMetrics


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("fleetops-victoria-metrics")))
    yield vm
    vm.stop()


@pytest.fixture
def metrics(victoria: VictoriaMetrics, settings) -> Iterator[VictoriaMetrics]:  # type: ignore[no-untyped-def]
    victoria.delete_all()
    settings.GPUFLEET_METRICS_URL = victoria.url
    settings.GPUFLEET_SCRAPE_INTERVAL = "30"
    yield victoria
