"""How `billing.collect` cuts a window into measurement tasks: three days each (one DCGM range query of
the hourly method), the last three days a day each (little left to store after the TSDB's last answer),
every hour covered once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from billing.collect import _spans

START = datetime(2025, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize(("hours", "expected"), [
    (30 * 24, [72] * 9 + [24] * 3),
    (31 * 24, [72] * 9 + [24] * 4),
    (5, [5]),
    (4 * 24, [24] * 4),
    (6 * 24 + 5, [72] + [24] * 3 + [5]),
])
def test_tasks_cover_the_window_once_three_days_then_days(hours, expected):
    end = START + timedelta(hours=hours)
    spans = list(_spans(START, end))
    assert [int((upper - lower) / timedelta(hours=1)) for lower, upper in spans] == expected
    assert spans[0][0] == START and spans[-1][1] == end
    assert all(earlier[1] == later[0] for earlier, later in pairwise(spans))


@pytest.mark.django_db
def test_collect_pauses_automatic_garbage_collection_while_it_runs():
    """Measuring and storing run with the cyclic collector paused (gcpause), and it is back on afterwards."""
    import gc

    from billing import collect
    from tests.billing.helpers import catalog

    catalog()
    states: list[bool] = []

    class Recorder:
        def range(self, query: str, start: datetime, end: datetime, step_seconds: int) -> list:
            states.append(gc.isenabled())
            return []

    assert gc.isenabled()
    run = collect.collect(START, START + timedelta(days=1), client=Recorder())
    assert run.records == 0 and states and not any(states)
    assert gc.isenabled()
