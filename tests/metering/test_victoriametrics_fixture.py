"""The reusable VictoriaMetrics helper: its own process and storage, import + flush, delete_all, stop."""

from __future__ import annotations

import pytest

from infra.metrics import MetricsClient
from tests.support.victoriametrics import VictoriaMetrics

pytestmark = pytest.mark.service


def test_import_delete_and_reimport(tmp_path):
    vm = VictoriaMetrics.start(tmp_path / "vm")
    try:
        client = MetricsClient(vm.url)
        t0 = 1_700_000_000
        assert vm.import_prometheus((f'probe{{a="x"}} 1 {(t0 + 30 * k) * 1000}' for k in range(5)), batch=2) == 5
        assert client.instant("count_over_time(probe[10m])", t0 + 200)[0].value == 5  # visible at once
        vm.delete_all()
        assert client.instant("count_over_time(probe[10m])", t0 + 200) == []
        vm.import_prometheus([f'probe{{a="x"}} 1 {(t0 + 30 * k) * 1000}' for k in range(3)])
        assert client.instant("count_over_time(probe[10m])", t0 + 200)[0].value == 3
    finally:
        vm.stop()
    assert vm.process.poll() is not None  # the process it started is gone
