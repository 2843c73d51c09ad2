"""Pinned clocks for tests: no test may depend on the day the suite runs.

`pinned(at)` moves this process's clock (``gpufleet.clock``, ``django.utils.timezone.now``, ``auto_now``
fields, ``datetime.now``) to `at` and lets it tick from there, so code that measures elapsed time or
waits on sockets still works (``time.monotonic`` is left alone by time-machine). Subprocesses and
servers (a Celery worker, VictoriaMetrics, PostgreSQL's ``now()``) keep the real clock: tests that
talk to them compute their dates relative to the real now instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import time_machine

# Mid-November 2026: October 2026 has ended (it can be invoiced and finalized), November has not, and
# 2027 is in the future. The billing tests' fixed data is laid out around this instant.
MID_NOVEMBER_2026 = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)


@contextmanager
def pinned(at: datetime = MID_NOVEMBER_2026) -> Iterator[datetime]:
    if at.tzinfo is None:
        raise ValueError("pin the clock to a UTC-aware datetime")
    with time_machine.travel(at, tick=True):
        yield at
