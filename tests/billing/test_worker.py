"""The hourly beat task in a real Celery worker (real Redis, real PostgreSQL, real VictoriaMetrics):
it collects the last settled hours, and running it again replaces rather than adds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db.models import Sum

from billing import collect, tasks
from billing.models import UsageCollection, UsageRecord
from gpufleet.celery import app
from scheduling.models import Flavor, GpuModel
from tests.support import factories
from tests.support.celery_worker import celery_worker
from tests.support.celery_worker import wait_until as wait
from tests.support.dcgm_series import Gpu, Hold, Timeline, lines

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service, pytest.mark.real_clock]

A100 = "NVIDIA A100 80GB PCIe"


def test_hourly_collection_in_a_real_worker(victoria, monkeypatch, settings, gitops_repo: Path, tmp_path: Path):
    monkeypatch.setenv("GPUFLEET_METRICS_URL", victoria.url)  # the worker reads it from its environment
    settings.GPUFLEET_METRICS_URL = victoria.url
    model = GpuModel.objects.create(name="a100-80gb-pcie", dcgm_model_name=A100, memory_mib=81920)
    Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=2)
    factories.tenant("acme", "trusted", phase="ready")
    _, end = collect.recent_window(datetime.now(UTC))
    # One hour held, inside the window now and inside the window of the next hour's run as well.
    hold = Hold("tenant-acme", "train-0", end - timedelta(hours=2), end - timedelta(hours=1))
    timeline = Timeline(end - timedelta(hours=3), end)
    timeline.gpus = [Gpu("GPU-now", A100, (hold,))]
    victoria.delete_all()
    victoria.import_prometheus(lines(timeline))

    log = tmp_path / "worker.log"
    with celery_worker(gitops_repo, log) as queue:
        for runs in (1, 2):
            tasks.collect_recent.apply_async(queue=queue)
            wait(f"collection run {runs}", lambda n=runs: UsageCollection.objects.count() == n, log)
            total = UsageRecord.objects.aggregate(s=Sum("unit_seconds"))["s"]
            assert total == Decimal(3600), log.read_text()[-2000:]
    assert app.conf.task_acks_late and tasks.collect_recent.acks_late
