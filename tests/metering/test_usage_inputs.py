"""Bad arguments to the measurement fail before any query, naming what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from billing.metering.promql import Queries, QuerySettings
from billing.metering.usage import FlavorSpec, MeteringInputError, measure, settles_at
from tests.metering.helpers import A100, FLAVORS, H100


class NoQueries:
    def range(self, *args):
        raise AssertionError("no query may run for bad input")


START, END = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"start": datetime(2026, 1, 1)}, "start"),
    ({"start": datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))}, "start"),
    ({"end": datetime(2026, 1, 2, 0, 30, tzinfo=UTC)}, "end"),
    ({"end": START}, "end"),
    ({"scrape_interval": 7}, "settings"),
    ({"scrape_interval": 0}, "settings"),
    ({"max_gap_scrapes": -1}, "settings"),
    ({"share_rule": "min"}, "share_rule"),
    ({"dialect": "sql"}, "dialect"),
    ({"usage_metric": 'x"} or vector(1) #'}, "settings"),
    ({"chunk_hours": 0}, "chunk_hours"),
    ({"hourly_chunk_hours": 0}, "hourly_chunk_hours"),
    ({"flavors": (*FLAVORS, FlavorSpec("h100", "whole", "NVIDIA L4", Decimal(1)))}, "flavors"),
    ({"flavors": (*FLAVORS, FlavorSpec("other", "whole", H100.replace(" ", "-"), Decimal(1)))}, "flavors"),
    ({"flavors": (*FLAVORS, FlavorSpec("share-2", "hami", A100, Decimal("0.5")))}, "flavors"),
    ({"flavors": (FlavorSpec("m", "mig", A100, Decimal(1)),)}, "flavors"),
    ({"flavors": (FlavorSpec("w", "whole", A100, Decimal(0)),)}, "flavors"),
    ({"flavors": (FlavorSpec("w", "whole", A100, 1),)}, "flavors"),
    ({"flavors": (FlavorSpec("w", "vgpu", A100, Decimal(1)),)}, "flavors"),
])
def test_bad_input_is_refused_before_querying(kwargs, field):
    args = {"start": START, "end": END, "flavors": FLAVORS, **kwargs}
    start, end, flavors = args.pop("start"), args.pop("end"), args.pop("flavors")
    with pytest.raises(MeteringInputError) as caught:
        measure(NoQueries(), flavors, start, end, **args)
    assert caught.value.field == field


def test_settling_time_and_query_shape():
    assert settles_at(END, scrape_interval=30, max_gap_scrapes=3) == END + timedelta(seconds=150)
    for dialect, rollups in (("promql", 7), ("metricsql", 2)):
        query = Queries(QuerySettings(30, 3, "DCGM_FI_DEV_FB_USED", dialect=dialect)).dcgm_hourly_slots()
        # each rollup selects both label schemes; the HAMi device check adds one more
        assert query.count("DCGM_FI_DEV_FB_USED") == 2 * rollups
        assert "[3600s:30s]" in query and 'pod!=""' in query and 'pod_name!=""' in query


def test_chunks_stay_within_the_subquery_point_budget():
    calls = []

    class Empty:
        def range(self, query, start, end, step):
            calls.append((end - start).total_seconds() / 3600 + 1)
            return []

    measure(Empty(), FLAVORS, START, START + timedelta(days=31), scrape_interval=10, chunk_hours=744,
            method="per-slot")
    assert max(calls) == 50_000 * 10 // 3600  # 138 h of 10 s slots
    assert sum(calls) == 2 * 31 * 24  # every hour still covered, by both queries
    calls.clear()
    measure(Empty(), FLAVORS, START, START + timedelta(days=31), scrape_interval=10, chunk_hours=744)
    assert max(calls) == 50_000 * 10 // 3600  # the hourly method's chunks are the same
    ranged = [hours for hours in calls if hours > 1]  # less the one-point lists of HAMi-managed GPUs
    assert sum(ranged) == 2 * 31 * 24 and len(calls) - len(ranged) == len(ranged) // 2
