"""Recorded demand: job traces and the reconstruction of jobs from hourly usage (pure, hand-worked)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scheduling.simulator import ScenarioError
from scheduling.simulator.replay import parse_trace, reconstruct_jobs


def test_hourly_levels_become_stacked_runs():
    # hours 0..3 at 2, 3, 3, 1 units: level 0 runs 4 h, level 1 runs 3 h, level 2 runs hours 1-2.
    rows = [("a", "h100", h, n * 3600) for h, n in enumerate([2, 3, 3, 1])]
    jobs = reconstruct_jobs(rows)
    shapes = sorted((j["submit_s"], j["duration_s"], j["pods"]) for j in jobs)
    assert shapes == [(0, 3 * 3600, 1), (0, 4 * 3600, 1), (3600, 2 * 3600, 1)]
    # Exactly the recorded unit-hours come back.
    assert sum(j["pods"] * j["duration_s"] for j in jobs) == (2 + 3 + 3 + 1) * 3600


def test_runs_that_start_and_end_together_merge_into_multi_pod_jobs():
    rows = [("a", "h100", 5, 10 * 3600), ("a", "h100", 6, 10 * 3600)]
    jobs = reconstruct_jobs(rows)
    assert [(j["submit_s"], j["duration_s"], j["pods"]) for j in jobs] == [(5 * 3600, 7200, 8), (5 * 3600, 7200, 2)]


def test_partial_hours_round_to_whole_units():
    assert reconstruct_jobs([("a", "h100", 0, 1700)]) == []  # under half a unit-hour: no job
    assert len(reconstruct_jobs([("a", "h100", 0, 1900)])) == 1


CSV = """tenant,flavor,submit,gpus,pods,duration_s,priority
a,h100,2026-11-15T00:10:00+00:00,8,2,3600,5
b,h100,120,1,,60,
"""


def test_trace_csv_with_timestamps_and_seconds():
    jobs = parse_trace(CSV, datetime(2026, 11, 15, tzinfo=UTC))
    assert jobs[0] == {"tenant": "a", "flavor": "h100", "submit_s": 600.0, "pods": 2, "gpus_per_pod": 4,
                       "duration_s": 3600.0, "priority": 5}
    assert jobs[1]["submit_s"] == 120.0 and jobs[1]["pods"] == 1 and jobs[1]["priority"] == 0


def test_trace_json_and_its_errors_name_the_record():
    one = parse_trace('[{"tenant": "a", "flavor": "h", "submit": 0, "gpus": 2, "duration_s": 5}]')
    assert one[0]["gpus_per_pod"] == 2
    with pytest.raises(ScenarioError) as err:
        parse_trace('[{"tenant": "a", "flavor": "h", "submit": 0, "gpus": 3, "pods": 2, "duration_s": 5}]')
    assert err.value.field == "trace[0]"
    with pytest.raises(ScenarioError) as err:
        parse_trace(CSV)  # timestamps without a start
    assert err.value.field == "trace[0].submit"
    with pytest.raises(ScenarioError) as err:
        parse_trace("tenant,flavor,submit,gpus,duration_s\na,h,0,1,\n")
    assert err.value.field == "trace[0].duration_s"
