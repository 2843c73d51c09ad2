"""VictoriaMetrics stops in the middle of `billing collect` (a real server process, stopped mid-window).

Extends tests/billing/test_end_to_end.py::test_a_tsdb_failure_mid_window_changes_nothing (an injected
failure) with the real thing: the server process is stopped after the first day's queries. The window
is written in one transaction, so nothing changes; once the server is back on the same storage the
same collection stores the whole window.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from billing import collect
from billing.models import UsageCollection, UsageRecord
from infra.errors import TransientError
from scheduling.models import Flavor, GpuModel
from tests.support import factories
from tests.support.dcgm_series import Gpu, Hold, Timeline, lines
from tests.support.victoriametrics import VictoriaMetrics

pytestmark = [pytest.mark.django_db, pytest.mark.service]
A100 = "NVIDIA A100 80GB PCIe"
START, END = datetime(2025, 10, 30, tzinfo=UTC), datetime(2025, 11, 2, tzinfo=UTC)


class StopsServerAfter:
    """The real client; after `calls` range queries the server process is stopped (not simulated)."""

    def __init__(self, vm: VictoriaMetrics, calls: int) -> None:
        self.vm, self.calls, self.client = vm, calls, collect.metrics_client()

    def range(self, query, start, end, step_seconds):  # type: ignore[no-untyped-def]
        if self.calls == 0 and self.vm.process.poll() is None:
            self.vm.stop()
        self.calls -= 1
        return self.client.range(query, start, end, step_seconds)


def rows() -> list[tuple]:
    return list(UsageRecord.objects.order_by("pk").values_list("tenant_id", "flavor_id", "hour", "unit_seconds"))


def test_victoriametrics_stopped_mid_collect_changes_nothing_then_the_rerun_stores_all(settings,
                                                                                      tmp_path: Path) -> None:
    vm = VictoriaMetrics.start(tmp_path / "vm")
    try:
        settings.GPUFLEET_METRICS_URL = vm.url
        model = GpuModel.objects.create(name="a100-80gb-pcie", dcgm_model_name=A100, memory_mib=81920)
        Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=4)
        factories.tenant("acme", "trusted", phase="ready")
        timeline = Timeline(START, END)
        timeline.gpus = [Gpu("GPU-0", A100, (Hold("tenant-acme", "train", datetime(2025, 10, 30, 22, tzinfo=UTC),
                                                  datetime(2025, 11, 1, 2, tzinfo=UTC)),))]
        vm.import_prometheus(lines(timeline))
        vm.flush()
        before, collections = rows(), UsageCollection.objects.count()

        with pytest.raises(TransientError):
            collect.collect(START, END, client=StopsServerAfter(vm, 2))
        assert vm.process.poll() is not None  # really stopped
        assert rows() == before and UsageCollection.objects.count() == collections
    finally:
        vm.stop()

    back = VictoriaMetrics.start(tmp_path / "vm")  # same storage, new process
    try:
        settings.GPUFLEET_METRICS_URL = back.url
        collect.collect(START, END)
        assert UsageCollection.objects.count() == collections + 1
        total = sum(r[3] for r in rows())
        assert total == 28 * 3600  # 10-30 22:00 .. 11-01 02:00, one whole GPU
    finally:
        back.stop()
