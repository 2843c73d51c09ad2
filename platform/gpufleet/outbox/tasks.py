"""Beat runs the relay every GPUFLEET_OUTBOX_RELAY_SECONDS; each worker also runs it when it starts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from . import send


@shared_task(name="outbox.relay", acks_late=True)
def relay() -> int:
    return send.relay()


@worker_ready.connect
def _relay_on_start(**_: Any) -> None:
    # A worker coming up after an outage sends what the web processes could not, without waiting for beat.
    send.relay(min_age=timedelta(0))
