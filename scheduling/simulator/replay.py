"""Recorded demand, as jobs: a job trace (CSV/JSON text) or a reconstruction from hourly usage.

Both are pure (text or rows in, job dicts out); reading files and the database is the caller's job.

Reconstruction from hourly usage (billing's UsageRecord: unit-seconds per tenant, flavor and UTC hour):
the hour's mean units in use, n_h = round(unit_seconds / 3600), are stacked as levels; unit level k is busy
in every hour where n_h > k, and each maximal run of busy hours at one level becomes a one-unit job that
starts at the run's first hour and lasts the run. Runs of one tenant and flavor that start and end
together are merged into one job of several pods (at most 8), the shape a distributed job leaves. What
this can and cannot tell is in docs/simulator.md ("How far replay can be trusted").
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .scenario import ScenarioError

TRACE_FIELDS = ("tenant", "flavor", "submit", "gpus", "pods", "duration_s", "priority")
MAX_PODS = 8


def reconstruct_jobs(rows: Iterable[tuple[str, str, int, float]]) -> list[dict[str, Any]]:
    """rows: (tenant, flavor, hour index from the start, unit-seconds). Returns scenario `jobs` entries."""
    series: dict[tuple[str, str], dict[int, int]] = {}
    for tenant, flavor, hour, unit_seconds in rows:
        series.setdefault((tenant, flavor), {})[hour] = round(float(unit_seconds) / 3600)
    jobs: list[dict[str, Any]] = []
    for (tenant, flavor) in sorted(series):
        levels = series[(tenant, flavor)]
        last = max(levels) if levels else -1
        runs: dict[tuple[int, int], int] = {}  # (start hour, hours) -> units
        open_runs: dict[int, int] = {}  # level -> start hour
        for hour in range(0, last + 2):
            n = levels.get(hour, 0)
            for level in [lv for lv in open_runs if lv >= n]:
                start = open_runs.pop(level)
                runs[(start, hour - start)] = runs.get((start, hour - start), 0) + 1
            for level in range(n):
                open_runs.setdefault(level, hour)
        for (start, hours), units in sorted(runs.items()):
            while units > 0:
                pods = min(units, MAX_PODS)
                jobs.append({"tenant": tenant, "flavor": flavor, "submit_s": start * 3600, "pods": pods,
                             "gpus_per_pod": 1, "duration_s": hours * 3600})
                units -= pods
    return jobs


def _seconds(value: Any, start: datetime | None, field: str) -> float:
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if start is None:
        raise ScenarioError(field, "a timestamp needs a start time (or give seconds from the start)")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ScenarioError(field, f"not seconds or an ISO 8601 time: {text!r}") from exc
    if when.tzinfo is None:
        raise ScenarioError(field, "timestamps must carry a UTC offset")
    return (when - start).total_seconds()


def parse_trace(text: str, start: datetime | None = None) -> list[dict[str, Any]]:
    """A job trace as CSV (header: tenant,flavor,submit,gpus,pods,duration_s[,priority]) or a JSON list of
    objects with those keys. `gpus` is the job's total; pods split it evenly. `submit` is seconds from
    the start of the simulation or an ISO 8601 time (then `start` is required)."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScenarioError("trace", f"not JSON: {exc}") from exc
    else:
        records = list(csv.DictReader(io.StringIO(text)))
    jobs = []
    for i, rec in enumerate(records):
        where = f"trace[{i}]"
        if not isinstance(rec, dict):
            raise ScenarioError(where, "expected an object")
        missing = [k for k in ("tenant", "flavor", "submit", "gpus", "duration_s") if rec.get(k) in (None, "")]
        if missing:
            raise ScenarioError(f"{where}.{missing[0]}", "required")
        try:
            gpus, pods = int(rec["gpus"]), int(rec.get("pods") or 1)
            duration = float(rec["duration_s"])
            priority = int(rec.get("priority") or 0)
        except (TypeError, ValueError) as exc:
            raise ScenarioError(where, f"gpus, pods, priority must be integers and duration_s a number: {exc}") from exc
        if gpus < 1 or pods < 1 or gpus % pods or duration <= 0:
            raise ScenarioError(where, "gpus and pods must be >= 1 with gpus divisible by pods; duration_s > 0")
        submit = _seconds(rec["submit"], start, f"{where}.submit")
        if submit < 0:
            raise ScenarioError(f"{where}.submit", "before the start of the simulation")
        jobs.append({"tenant": str(rec["tenant"]), "flavor": str(rec["flavor"]), "submit_s": submit, "pods": pods,
                     "gpus_per_pod": gpus // pods, "duration_s": duration, "priority": priority})
    return jobs
