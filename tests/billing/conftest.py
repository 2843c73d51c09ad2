"""A real VictoriaMetrics for the billing end-to-end tests (one per session, its own storage)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.victoriametrics import VictoriaMetrics


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("billing-victoria-metrics")))
    yield vm
    vm.stop()
