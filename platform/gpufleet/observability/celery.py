"""Celery task durations for `/metrics`, and the worker's own metrics endpoint.

A worker pod has no web server, so with GPUFLEET_WORKER_METRICS_PORT set the worker's main process
serves the merged samples of its pool processes (PROMETHEUS_MULTIPROC_DIR) on that port, at
GPUFLEET_WORKER_METRICS_ADDR (the chart: the pod IP; unset: 127.0.0.1).
"""

from __future__ import annotations

import time
from typing import Any

from celery.signals import task_postrun, task_prerun, worker_ready

from gpufleet.core import conf

from .metrics import TASK_SECONDS

_started: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str = "", **_: Any) -> None:
    _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_finished(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    began = _started.pop(task_id, None)
    if began is not None and task is not None:
        TASK_SECONDS.labels(task=task.name, state=state or "UNKNOWN").observe(time.perf_counter() - began)


@worker_ready.connect
def _serve_worker_metrics(**_: Any) -> None:
    port = conf.WORKER_METRICS_PORT
    if port:
        from prometheus_client import start_http_server

        from .metrics import registry

        # Where the chart says (the pod's own IP, so the PodMonitor reaches it); loopback when nothing says:
        # prometheus_client's default, 0.0.0.0, would publish task names and tenant counts on every interface.
        address = conf.WORKER_METRICS_ADDR or "127.0.0.1"
        start_http_server(int(port), addr=address, registry=registry())
