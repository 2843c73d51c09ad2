"""A real VictoriaMetrics for the billing end-to-end tests (one per session, its own storage)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clock import pinned
from tests.support.victoriametrics import VictoriaMetrics


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("billing-victoria-metrics")))
    yield vm
    vm.stop()


@pytest.fixture(autouse=True)
def _billing_clock(request: pytest.FixtureRequest) -> Iterator[None]:
    """Billing tests run at a pinned instant (mid-November 2026) that their fixed periods are laid out
    around, whatever the date of the run. A test that drives a real worker or TSDB, which keep the
    real clock, opts out with ``@pytest.mark.real_clock`` and computes its dates relative to now."""
    if request.node.get_closest_marker("real_clock"):
        yield
        return
    with pinned():
        yield
