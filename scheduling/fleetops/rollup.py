"""Hourly roll-ups of idle slots and utilisation, recorded back into the TSDB. Pure: no Django.

A month report re-scanning every raw sample costs ~200 CPU-seconds for 1,000 GPUs (benchmarks/README.md,
`fleet_idle.py`). Here each hour is measured once, when it has settled, with the same per-slot code as a
report (`measure.dcgm_idle_bits`, `measure.utilisation`), and the result is written into VictoriaMetrics
as recorded series (`/api/v1/import`), the way recording rules store their output next to the raw data.
A report then reads those series plus, for hours without a usable roll-up, the raw samples.

Recorded series (every one carries `fingerprint` = the settings it was computed with, and `rev` = the
roll-up run, its computation time in ms, so a recomputation never writes a second value under an
existing series and timestamp: VictoriaMetrics keeps duplicates, it cannot overwrite):

* `gpufleet_idle_rollup{<DCGM identity>, part}`, one sample per block of `MASK_SLOTS` slots that holds
  an idle slot, at the block end: `part="profiling"` / `part="gpu_util"` — the block's idle slots (after
  replica merge and gap bridging) by signal, as an integer bit mask (bit j = the block's j-th slot; 40
  bits, exact in a float64); `part="peak"` — the peak FB_USED MiB of the block (`measure.SlotBits`).
  Idle-free blocks store nothing. `part="run"` — the idle runs cut at hour edges that can belong to a run
  of at least LONG_SLOTS (`_pieces`): what a report with such a minimum reads for whole hours.
* `gpufleet_util_rollup{tenant, flavor, field}` at the hour end: the `measure.Utilisation` fields in
  thousandths (integers: the fields are quantized to 0.001, so the float64 is exact). Reports of totals
  (`utilisation_totals`) sum them inside the TSDB; `utilisation` reads them per hour.
* `gpufleet_rollup_coverage{kind, fingerprint, rev}` at each hour end, value = rev: the hour was rolled
  up by run `rev` with these settings. The highest rev of an hour is its roll-up; older revs' samples are
  ignored by readers.

An hour's roll-up is *final* once it was computed at least `late_allowance` after the hour end (late
samples arriving before then are seen); reports use final roll-ups only and measure every other hour
(none, a recent one, other thresholds or scrape settings) from the raw samples, so a report is exact
whatever was rolled up. Bits are per slot, so the partial edge hours of a window not on whole hours are
the stored bits clipped to the window (exact: a slot's bit does not depend on the window it was measured
in). HAMi shares are not rolled up: their idle runs come from the raw per-slot path in every report.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Protocol

from billing.metering.promql import DCGM_IDENTITY
from billing.metering.usage import (
    FlavorIndex,
    FlavorSpec,
    MeteringInputError,
    RangeQuerier,
    _chunks,  # billing's: [start, end) in pieces of n hours
    settles_at,
)

from . import measure
from .promql import MASK_SLOTS, ActivityQueries

HOUR = timedelta(hours=1)
# Bump when what is stored changes: older roll-ups then no longer match any fingerprint. Per kind, so a
# change to one leaves the other's roll-ups valid (idle 2: run pieces, `part="run"`).
IDLE_FORMAT, UTIL_FORMAT = 2, 1
IDLE_METRIC, UTIL_METRIC, COVERAGE_METRIC = "gpufleet_idle_rollup", "gpufleet_util_rollup", "gpufleet_rollup_coverage"
IDLE, UTIL = "idle", "util"
DEFAULT_LATE_ALLOWANCE = timedelta(hours=1)
UTIL_FIELDS = ("allocated_seconds", "allocated_gpu_equivalent_seconds", "active_seconds",
               "active_gpu_equivalent_seconds", "memory_mib_seconds")
THOUSANDTHS = Decimal(1000)
# Integers above 2**53 are not exact in a float64: such a value is refused rather than rounded.
EXACT_LIMIT = 2 ** 53
# Hours of recorded series per read query (keeps each answer well inside -search.maxUniqueTimeseries).
READ_CHUNK_HOURS = 24 * 7
# A run of this many slots holds a whole aligned block of MASK_SLOTS slots wherever it starts: every run a
# report with such a minimum keeps has a block wholly inside it (its peak memory is the blocks' maximum).
LONG_SLOTS = 2 * MASK_SLOTS - 1
# A run piece's two values sit this many ms before the piece's end (inside its last slot, so in its hour).
RUN_MS, PEAK_MS = 1, 2
# Revs named in one summing query (13-digit numbers: ~3 KB of regex, well inside -search.maxQueryLen).
REV_BATCH = 200
DEFAULT_OPTIONS = measure.Options()
DEFAULT_GROUPS = (measure.ThresholdGroup(measure.Thresholds()),)


class Writer(Protocol):
    def import_json_lines(self, lines: Iterable[str]) -> None: ...


class Reader(RangeQuerier, Protocol):
    def export_lines(self, selector: str, start: datetime, end: datetime) -> list[str]: ...

    def instant(self, query: str, at: datetime) -> list: ...


class RollupClient(Reader, Writer, Protocol):
    pass


def _hash(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _settings(options: measure.Options, fmt: int) -> dict[str, object]:
    return {"s": options.scrape_interval, "n": options.max_gap_scrapes, "metric": options.usage_metric,
            "share": options.share_rule, "dialect": options.dialect, "format": fmt, "mask": MASK_SLOTS}


def idle_fingerprint(options: measure.Options, groups: Iterable[measure.ThresholdGroup]) -> str:
    """The scrape settings and every threshold group (thresholds and tenant namespaces)."""
    spec = sorted([str(g.thresholds.engine), str(g.thresholds.dram), str(g.thresholds.gpu_util),
                   None if g.namespaces is None else sorted(g.namespaces)] for g in groups)
    return _hash({"kind": IDLE, **_settings(options, IDLE_FORMAT), "groups": spec})


def util_fingerprint(options: measure.Options, flavors: Sequence[FlavorSpec]) -> str:
    """The scrape settings and the flavor catalog (names, models and weights are in the stored rows)."""
    spec = sorted([f.name, f.mode, f.model_name, str(f.weight), f.mig_profile] for f in flavors)
    return _hash({"kind": UTIL, **_settings(options, UTIL_FORMAT), "flavors": spec})


# -- time helpers -------------------------------------------------------------------------------------
def _ms(moment: datetime) -> int:
    return int(moment.timestamp()) * 1000


def _stamp(end_ms: int) -> int:
    """Where a value for the interval ending at `end_ms` is recorded: 1 ms before the end, inside the
    interval. A sample exactly at midnight is in the next day's index, and VictoriaMetrics 1.79 did not
    find a series whose only sample sat at a range query's last point on midnight (measured: the last
    hour of a day rolled up alone was missing from the report). Readers ask for the window (t - d, t]."""
    return end_ms - 1


def _at(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, tz=UTC)


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def ceil_hour(moment: datetime) -> datetime:
    floor = floor_hour(moment)
    return floor if floor == moment else floor + HOUR


def hours(start: datetime, end: datetime) -> list[datetime]:
    out, t = [], start
    while t < end:
        out.append(t)
        t += HOUR
    return out


def _ranges(wanted: Iterable[datetime]) -> list[tuple[datetime, datetime]]:
    """Contiguous [start, end) ranges of whole hours."""
    out: list[tuple[datetime, datetime]] = []
    for hour in sorted(wanted):
        if out and out[-1][1] == hour:
            out[-1] = (out[-1][0], hour + HOUR)
        else:
            out.append((hour, hour + HOUR))
    return out


def _whole_hours(start: datetime, end: datetime) -> None:
    for name, moment in (("start", start), ("end", end)):
        if moment != floor_hour(moment):
            raise MeteringInputError(name, "roll-ups are per hour; give a whole hour")


def settled_until(now: datetime, options: measure.Options) -> datetime:
    """End of the last hour no new scrape can change (billing's `settles_at`, plus the context block the
    idle masks read after a window)."""
    margin = settles_at(now, scrape_interval=options.scrape_interval,
                        max_gap_scrapes=options.max_gap_scrapes) - now
    margin = max(margin, timedelta(seconds=options.scrape_interval * MASK_SLOTS))
    return floor_hour(now - margin)


# -- coverage -----------------------------------------------------------------------------------------
def coverage_by_rev(client: RangeQuerier, kind: str, fingerprint: str, start: datetime,
                    end: datetime) -> dict[int, set[datetime]]:
    """{rev: the whole hours in [start, end) it rolled up with `fingerprint`}. Per rev, not just the latest
    per hour: a reader summing inside the TSDB must know which runs also hold superseded hours."""
    query = (f'max by (rev) (max_over_time({{__name__="{COVERAGE_METRIC}", kind="{kind}", '
             f'fingerprint="{fingerprint}"}}[3600s]))')
    out: dict[int, set[datetime]] = defaultdict(set)
    for lower, upper in _chunks(start, end, READ_CHUNK_HOURS * 4):
        for series in client.range(query, lower + HOUR, upper, 3600):
            for sample in series.samples:
                if sample.value.is_finite():
                    out[int(sample.value)].add(_at(int(sample.timestamp)) - HOUR)
    return dict(out)


def _latest(by_rev: dict[int, set[datetime]]) -> dict[datetime, int]:
    out: dict[datetime, int] = {}
    for rev, covered in by_rev.items():
        for hour in covered:
            out[hour] = max(out.get(hour, rev), rev)
    return out


def _clean_revs(by_rev: dict[int, set[datetime]], use: dict[datetime, int]) -> frozenset[int]:
    """The revs that are the final, latest roll-up of every hour they rolled up (of those asked about): any
    sample of theirs in those hours is one to take."""
    return frozenset(rev for rev, covered in by_rev.items() if all(use.get(hour) == rev for hour in covered))


def coverage(client: RangeQuerier, kind: str, fingerprint: str, start: datetime, end: datetime) -> dict[datetime, int]:
    """{hour start: rev of its latest roll-up} for the whole hours in [start, end) rolled up with `fingerprint`."""
    return _latest(coverage_by_rev(client, kind, fingerprint, start, end))


def final_hours(cov: dict[datetime, int], late_allowance: timedelta) -> dict[datetime, int]:
    """The hours whose roll-up was computed at least `late_allowance` after the hour ended."""
    return {hour: rev for hour, rev in cov.items() if rev >= _ms(hour + HOUR + late_allowance)}


def plan(cov: dict[datetime, int], start: datetime, end: datetime, late_allowance: timedelta,
         *, force: bool = False) -> list[tuple[datetime, datetime]]:
    """Ranges of the hours in [start, end) that need a roll-up: never rolled up, or not final yet
    (rolled up before late samples stopped counting); `force`: every hour."""
    final = final_hours(cov, late_allowance)
    return _ranges(h for h in hours(start, end) if force or h not in final)


def _rev(now: datetime, cov: dict[datetime, int]) -> int:
    # Strictly above any earlier run of these hours, so the newest roll-up always wins.
    return max(int(now.timestamp() * 1000), max(cov.values(), default=0) + 1)


def _line(labels: dict[str, str], values: Sequence[int | float], stamps: Sequence[int]) -> str:
    clean = {k: v for k, v in labels.items() if v != ""}  # the TSDB drops empty labels anyway
    return json.dumps({"metric": clean, "values": list(values), "timestamps": list(stamps)}, separators=(",", ":"))


def _coverage_lines(kind: str, fingerprint: str, rev: int, start: datetime, end: datetime) -> list[str]:
    stamps = [_stamp(_ms(h + HOUR)) for h in hours(start, end)]
    labels = {"__name__": COVERAGE_METRIC, "kind": kind, "fingerprint": fingerprint, "rev": str(rev)}
    return [_line(labels, [rev] * len(stamps), stamps)]


def _exact(value: int) -> int:
    if abs(value) >= EXACT_LIMIT:
        raise MeteringInputError("rollup", f"value {value} is not exact in a float64")
    return value


# -- idle ---------------------------------------------------------------------------------------------
def _group_bits(client: RangeQuerier, groups: Sequence[measure.ThresholdGroup], start: datetime, end: datetime,
                options: measure.Options) -> dict[tuple[str, ...], measure.SlotBits]:
    """Idle slots of every DCGM allocation in [start, end), each group with its own thresholds (the raw path
    of `measure.idle_runs`, without HAMi)."""
    settings = options.query_settings()
    named = tuple(ns for g in groups if g.namespaces is not None for ns in g.namespaces)
    out: dict[tuple[str, ...], measure.SlotBits] = {}
    for group in groups:
        if group.namespaces is not None and not group.namespaces:
            continue
        queries = ActivityQueries(settings, group.thresholds, namespaces=group.namespaces,
                                  exclude=named if group.namespaces is None else ())
        for key, bits in measure.dcgm_idle_bits(client, queries, start, end, options).items():
            if key in out:
                out[key].merge(bits)
            else:
                out[key] = bits
    return out


def idle_lines(bits: dict[tuple[str, ...], measure.SlotBits], options: measure.Options, fingerprint: str,
               rev: int) -> Iterator[str]:
    """The recorded series of measured idle slots: one line per allocation and part."""
    s = options.scrape_interval
    full = (1 << MASK_SLOTS) - 1
    hour_slots = 3600 // s  # s divides 3600 (billing's QuerySettings)
    for key, slot_bits in bits.items():
        labels = dict(zip(DCGM_IDENTITY, key, strict=True)) | {
            "__name__": IDLE_METRIC, "fingerprint": fingerprint, "rev": str(rev)}
        first_block = (slot_bits.base // MASK_SLOTS) * MASK_SLOTS  # slot index where its first block starts
        offset = slot_bits.base - first_block
        idle, prof = slot_bits.idle << offset, slot_bits.profiling << offset
        series: dict[str, tuple[list[int | float], list[int]]] = {
            p: ([], []) for p in ("profiling", "gpu_util", "peak")}
        block = 0
        while idle >> (block * MASK_SLOTS):
            g0 = first_block + block * MASK_SLOTS  # the block's first slot
            end_t = (g0 + MASK_SLOTS) * s
            mask = (idle >> (block * MASK_SLOTS)) & full
            p = (prof >> (block * MASK_SLOTS)) & full
            # Where 40 slots do not tile an hour (s = 60: 40-minute blocks), a block straddles hour edges: it is
            # recorded once per hour it has slots in, stamped inside that hour, so a reader takes each hour's
            # slots from that hour's rev (and finds them when it reads that hour only).
            lo = 0
            while mask and lo < MASK_SLOTS:
                hi = min(MASK_SLOTS, ((g0 + lo) // hour_slots + 1) * hour_slots - g0)
                here = ((1 << hi) - 1) ^ ((1 << lo) - 1)
                stamp = _stamp((g0 + hi) * s * 1000)
                for part, value in (("profiling", p & here), ("gpu_util", mask & ~p & here)):
                    if value:
                        series[part][0].append(_exact(value))
                        series[part][1].append(stamp)
                if mask & here and end_t in slot_bits.peaks:
                    series["peak"][0].append(float(slot_bits.peaks[end_t]))
                    series["peak"][1].append(stamp)
                lo = hi
            block += 1
        if pieces_apply(options):
            series |= _pieces(slot_bits, s)
        for part, (values, stamps) in series.items():
            if values:
                yield _line(labels | {"part": part}, values, stamps)


def pieces_apply(options: measure.Options) -> bool:
    """Run pieces are recorded and read when blocks tile hours (a piece then holds whole blocks only)."""
    return 3600 % (options.scrape_interval * MASK_SLOTS) == 0


def _pieces(slot_bits: measure.SlotBits, s: int) -> dict[str, tuple[list[int | float], list[int]]]:
    """The allocation's idle runs cut at hour edges, for reports with a minimum of at least LONG_SLOTS, as
    one series (`part="run"`: one line per allocation for a reader, not two): per piece, 1 ms before its end,
    2 x its length in slots + 1 when a slot of it is idle by the profiling signal, and 2 ms before its end
    the peak MiB over the blocks wholly inside it (when one is). Only pieces that can belong to such a run
    are kept: at least LONG_SLOTS long, or touching an hour edge (the run may go on in the next or previous
    hour). A piece lies in one hour, so a reader takes it from the rev it takes for that hour, as it does
    block masks."""
    hour_slots, block = 3600 // s, s * MASK_SLOTS
    values: list[int | float] = []
    stamps: list[int] = []
    for first, length in measure._ones(slot_bits.idle):
        a, run_end = slot_bits.base + first, slot_bits.base + first + length
        while a < run_end:
            b = min(run_end, (a // hour_slots + 1) * hour_slots)
            if b - a >= LONG_SLOTS or a % hour_slots == 0 or b % hour_slots == 0:
                prof = (slot_bits.profiling >> (a - slot_bits.base)) & ((1 << (b - a)) - 1)
                inside = [v for t, v in slot_bits.peaks.items() if a * s <= t - block and t <= b * s]
                if inside:
                    values.append(float(max(inside)))
                    stamps.append(b * s * 1000 - PEAK_MS)
                values.append(2 * (b - a) + (1 if prof else 0))
                stamps.append(b * s * 1000 - RUN_MS)
            a = b
    return {"run": (values, stamps)}


def _record(client: RollupClient, lines: Iterable[str], kind: str, fingerprint: str, rev: int,
            start: datetime, end: datetime) -> int:
    """Record a roll-up's series, then its coverage (hours rolled up). Data first, coverage after it: a
    reader that sees the coverage sees the data (the client flushes)."""
    client.import_json_lines(lines)
    client.import_json_lines(_coverage_lines(kind, fingerprint, rev, start, end))
    return len(hours(start, end))


def rollup_idle(client: RollupClient, start: datetime, end: datetime, options: measure.Options,
                groups: Sequence[measure.ThresholdGroup], now: datetime) -> int:
    """Measure the idle slots of the settled whole hours [start, end) once and record them; returns the
    number of hours rolled up. Running it twice records the same slots under a newer rev (harmless)."""
    _whole_hours(start, end)
    end = min(end, settled_until(now, options))
    if start >= end:
        return 0
    fingerprint = idle_fingerprint(options, groups)
    rev = _rev(now, coverage(client, IDLE, fingerprint, start, end))
    bits = _group_bits(client, groups, start, end, options)
    return _record(client, idle_lines(bits, options, fingerprint, rev), IDLE, fingerprint, rev, start, end)


def _export(client: Reader, selector: str,
            use: dict[datetime, int]) -> Iterator[tuple[dict[str, str], int, list, list]]:
    """(labels, rev, values, timestamps ms) of the recorded series matching `selector` over the hours in
    `use`. Raw samples through `/api/v1/export`: a report needs every recorded sample once, so no step
    evaluation (a range query at one step per block cost VictoriaMetrics 3 CPU-s for the benchmark's month)."""
    for lower, upper in _ranges(use):
        for a, b in _chunks(lower, upper, READ_CHUNK_HOURS):
            lines = [line for line in client.export_lines(selector, a, b) if line]
            # One JSON array per answer: json.loads per line cost more than the rest of a report's decoding.
            for item in json.loads("[" + ",".join(lines) + "]"):
                labels = item["metric"]
                yield labels, int(labels.get("rev", "0")), item["values"], item["timestamps"]


def _stored_bits(client: Reader, fingerprint: str, use: dict[datetime, int],
                 options: measure.Options) -> dict[tuple[str, ...], measure.SlotBits]:
    """Recorded idle slots of the hours in `use` (hour -> the rev to take)."""
    s = options.scrape_interval
    block = s * MASK_SLOTS
    width = MASK_SLOTS // 8  # bytes per block mask
    revs = {int(hour.timestamp()): rev for hour, rev in use.items()}
    # Per allocation: {global block number: mask} per part, and peaks; one integer per part at the end.
    masks: dict[tuple[str, ...], dict[str, dict[int, int]]] = {}
    peaks: dict[tuple[str, ...], dict[int, Decimal]] = defaultdict(dict)
    selector = f'{{__name__="{IDLE_METRIC}", fingerprint="{fingerprint}", part=~"profiling|gpu_util|peak"}}'
    for labels, rev, values, stamps in _export(client, selector, use):
        key = tuple([labels.get(name, "") for name in DCGM_IDENTITY])
        part = labels.get("part", "")
        into = masks.setdefault(key, {}).setdefault(part, {}) if part != "peak" else None
        for value, stamp in zip(values, stamps, strict=True):
            # Stamped 1 ms before the end of the block, or of the block's part in one hour (`idle_lines`).
            if revs.get(stamp // 3_600_000 * 3600) != rev:
                continue  # another (older) run's roll-up of this hour, or an hour not asked for
            block_end = -(-((stamp + 1) // 1000) // block) * block
            if into is None:
                peak = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
                peaks[key][block_end] = max(peaks[key].get(block_end, peak), peak)
            else:
                into[block_end // block] = into.get(block_end // block, 0) | int(value)
    out: dict[tuple[str, ...], measure.SlotBits] = {}
    for key, by_part in masks.items():
        numbers = [g for blocks in by_part.values() for g in blocks]
        if not numbers:
            continue
        low, high = min(numbers), max(numbers)
        ints = {}
        for part, blocks in by_part.items():
            buf = bytearray((high - low + 1) * width)
            for g, mask in blocks.items():
                buf[(g - low) * width:(g - low + 1) * width] = mask.to_bytes(width, "little")
            ints[part] = int.from_bytes(buf, "little")
        prof = ints.get("profiling", 0)
        # Block g ends at g·block: its first slot is (g - 1)·MASK_SLOTS.
        out[key] = measure.SlotBits((low - 1) * MASK_SLOTS, prof | ints.get("gpu_util", 0), prof,
                                    peaks.get(key, {}))
    return out


Piece = tuple[int, int, bool, Decimal | None]  # first slot, end slot, profiling, peak MiB of its whole blocks


def _stored_pieces(client: Reader, fingerprint: str, use: dict[datetime, int], options: measure.Options,
                   clean: frozenset[int] = frozenset()) -> dict[tuple[str, ...], list[Piece]]:
    """Recorded run pieces (`_pieces`) of the hours in `use` (hour -> the rev to take), per allocation,
    in time order. `clean`: revs that are the one to take for every hour they rolled up (`_clean_revs`):
    their samples need no check per hour."""
    s = options.scrape_interval
    revs = {int(hour.timestamp()): rev for hour, rev in use.items()}
    found: dict[tuple[str, ...], tuple[dict[int, int], dict[int, Decimal]]] = {}
    selector = f'{{__name__="{IDLE_METRIC}", fingerprint="{fingerprint}", part="run"}}'
    blank = ("",) * len(DCGM_IDENTITY)
    for labels, rev, values, stamps in _export(client, selector, use):
        key = tuple(map(labels.get, DCGM_IDENTITY, blank))
        runs, peaks = found.get(key) or found.setdefault(key, ({}, {}))
        checked = rev not in clean
        for value, stamp in zip(values, stamps, strict=True):
            if checked and revs.get(stamp // 3_600_000 * 3600) != rev:
                continue  # another (older) run's roll-up of this hour, or an hour not asked for
            if stamp % 1000 == 1000 - RUN_MS:
                runs[(stamp + RUN_MS) // 1000 // s] = int(value)
            else:
                peak = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
                peaks[(stamp + PEAK_MS) // 1000 // s] = peak
    return {key: [(b - (v >> 1), b, bool(v & 1), peaks.get(b)) for b, v in sorted(runs.items())]
            for key, (runs, peaks) in found.items() if runs}


def _pieces_as_bits(pieces: list[Piece], s: int) -> measure.SlotBits:
    """Pieces as slot bits (`runs_from_bits` joins them with measured or clipped bits of other hours): every
    slot of a profiling piece counts as profiling (a run's signal asks only whether one is), its peak is put
    on the end of its first whole block (the run's peak is the maximum over its whole blocks)."""
    base = pieces[0][0]
    idle = profiling = 0
    peaks: dict[int, Decimal] = {}
    for a, b, prof, peak in pieces:
        bits = ((1 << (b - a)) - 1) << (a - base)
        idle |= bits
        if prof:
            profiling |= bits
        if peak is not None:
            peaks[(-(-a // MASK_SLOTS) + 1) * MASK_SLOTS * s] = peak
    return measure.SlotBits(base, idle, profiling, peaks)


def _joined(pieces: list[Piece]) -> Iterator[tuple[int, int, bool, Decimal | None]]:
    """Runs of adjacent pieces: (first slot, end slot, profiling, peak over the pieces' whole blocks)."""
    a, b, prof, peak = pieces[0]
    for a2, b2, prof2, peak2 in pieces[1:]:
        if a2 == b:
            b, prof = b2, prof or prof2
            peak = peak2 if peak is None else (peak if peak2 is None else max(peak, peak2))
            continue
        yield a, b, prof, peak
        a, b, prof, peak = a2, b2, prof2, peak2
    yield a, b, prof, peak


def _clip(bits: measure.SlotBits, first_slot: int, end_slot: int) -> None:
    lo, hi = max(first_slot - bits.base, 0), max(end_slot - bits.base, 0)
    window = ((1 << hi) - 1) ^ ((1 << lo) - 1) if hi > lo else 0
    bits.idle &= window
    bits.profiling &= window


def idle_runs(client: Reader, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
              options: measure.Options = DEFAULT_OPTIONS,
              groups: Sequence[measure.ThresholdGroup] = DEFAULT_GROUPS, *,
              namespaces: frozenset[str] | None = None,
              late_allowance: timedelta = DEFAULT_LATE_ALLOWANCE,
              min_seconds: int = 0) -> tuple[list[measure.IdleRun], int]:
    """`measure.idle_runs` (same runs) of at least `min_seconds`, reading final roll-ups where they exist.
    `groups` are the fleet's threshold groups (they select the roll-ups); `namespaces`: only these tenant
    namespaces. Returns the runs and the number of whole hours that had to be measured from raw samples.

    With a minimum of at least LONG_SLOTS slots (the fleet default, 60 min at 30 s, is 120) the whole hours
    inside the window are read as run pieces: the TSDB hands over only the pieces that can belong to such a
    run, by label (`part="run"`), a few values per idle stretch instead of every block mask. Edge hours of a
    window not on whole hours are read as block masks and clipped; hours without a final roll-up are measured."""
    measure.check_window(start, end)
    s = options.scrape_interval
    start, end = measure._slot_floor(start, s), measure._slot_floor(end, s)
    if start >= end:
        raise MeteringInputError("end", f"window is shorter than one scrape interval ({s} s)")
    groups = list(groups)
    index = FlavorIndex(flavors)
    min_slots = -(-max(min_seconds, 0) // s)
    first_hour, last_hour = floor_hour(start), ceil_hour(end)
    fingerprint = idle_fingerprint(options, groups)
    by_rev = coverage_by_rev(client, IDLE, fingerprint, first_hour, last_hour)
    use = final_hours(_latest(by_rev), late_allowance)
    pieces: dict[tuple[str, ...], list[Piece]] = {}
    if min_slots >= LONG_SLOTS and pieces_apply(options):
        whole = {h: rev for h, rev in use.items() if start <= h and h + HOUR <= end}
        pieces = _stored_pieces(client, fingerprint, whole, options, _clean_revs(by_rev, use)) if whole else {}
        masked = {h: rev for h, rev in use.items() if h not in whole}
    else:
        masked = use
    bits = _stored_bits(client, fingerprint, masked, options) if masked else {}
    if namespaces is not None:
        bits = {k: v for k, v in bits.items() if k[0] in namespaces}
        pieces = {k: v for k, v in pieces.items() if k[0] in namespaces}
    raw_groups = groups if namespaces is None else _narrow(groups, namespaces)
    missing = [h for h in hours(first_hour, last_hour) if h not in use]
    for lower, upper in _ranges(missing):
        for key, more in _group_bits(client, raw_groups, max(lower, start), min(upper, end), options).items():
            if key in bits:
                bits[key].merge(more)
            else:
                bits[key] = more
    first_slot, end_slot = int(start.timestamp()) // s, int(end.timestamp()) // s
    for slot_bits in bits.values():
        _clip(slot_bits, first_slot, end_slot)
    hami_devices = measure._hami_devices(client, ActivityQueries(options.query_settings()), start, end)
    window_end = int(end.timestamp())
    runs = []
    doubtful: set[tuple[str, ...]] = set()
    for key, own in pieces.items():
        if key in bits:  # also edge or raw hours: joined with those slots as bits
            bits[key].merge(_pieces_as_bits(own, s))
            continue
        who = measure.allocation(key, index, hami_devices)
        if who is None:
            continue
        found = []
        for a, b, prof, peak in _joined(own):
            if b - a >= min_slots:
                if peak is None:  # no peak of a whole block (FB_USED absent): the masks' peaks decide
                    doubtful.add(key)
                    break
                found.append(measure.idle_run(who, a * s, b * s, prof, window_end, peak))
        if key not in doubtful:
            runs += found
    if doubtful:  # rare: read these allocations' block masks of the hours their pieces lie in
        spans = {_at(a * s - a * s % 3600) for key in doubtful for a, _, _, _ in pieces[key]}
        more = _stored_bits(client, fingerprint, {h: use[h] for h in spans}, options)
        for key in doubtful:
            bits[key] = more[key]
    runs += measure.runs_from_bits(bits, index, options, hami_devices, window_end, min_slots)
    if hami_devices:  # HAMi shares: always the raw per-slot path (not rolled up)
        named = tuple(ns for g in raw_groups if g.namespaces is not None for ns in g.namespaces)
        for group in raw_groups:
            if group.namespaces is not None and not group.namespaces:
                continue
            queries = ActivityQueries(options.query_settings(), group.thresholds, namespaces=group.namespaces,
                                      exclude=named if group.namespaces is None else ())
            runs += [r for r in measure._runs_of(client, queries, index, start, end, s, True)
                     if r.idle_seconds >= min_seconds]
    # IdleRun's dataclass order, by a key tuple (comparing 60,000 dataclasses field by field is slow).
    runs.sort(key=RUN_ORDER)
    return runs, len(missing)


RUN_ORDER = operator.attrgetter(*(f.name for f in dataclasses.fields(measure.IdleRun) if f.compare))


def _narrow(groups: Sequence[measure.ThresholdGroup], namespaces: frozenset[str]) -> list[measure.ThresholdGroup]:
    """The groups restricted to `namespaces` (the default group lists them explicitly)."""
    owned = {ns for g in groups if g.namespaces is not None for ns in g.namespaces}
    out = []
    for group in groups:
        chosen = (namespaces - owned) if group.namespaces is None else (set(group.namespaces) & namespaces)
        out.append(measure.ThresholdGroup(group.thresholds, tuple(sorted(chosen))))
    return out


# -- utilisation --------------------------------------------------------------------------------------
def util_lines(rows: Iterable[measure.Utilisation], fingerprint: str, rev: int) -> list[str]:
    series: dict[tuple[str, str, str], tuple[list[int | float], list[int]]] = defaultdict(lambda: ([], []))
    for row in rows:
        for name in UTIL_FIELDS:
            values, stamps = series[(row.tenant_slug, row.flavor, name)]
            values.append(_exact(int(getattr(row, name) * THOUSANDTHS)))
            stamps.append(_stamp(_ms(row.hour_start + HOUR)))
    return [_line({"__name__": UTIL_METRIC, "tenant": tenant, "flavor": flavor, "field": name,
                   "fingerprint": fingerprint, "rev": str(rev)}, values, stamps)
            for (tenant, flavor, name), (values, stamps) in sorted(series.items())]


def rollup_utilisation(client: RollupClient, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
                       options: measure.Options, now: datetime) -> int:
    """Measure utilisation of the settled whole hours [start, end) once and record it (hours rolled up)."""
    _whole_hours(start, end)
    end = min(end, settled_until(now, options))
    if start >= end:
        return 0
    fingerprint = util_fingerprint(options, flavors)
    rev = _rev(now, coverage(client, UTIL, fingerprint, start, end))
    rows = measure.utilisation(client, flavors, start, end, options)
    return _record(client, util_lines(rows, fingerprint, rev), UTIL, fingerprint, rev, start, end)


def utilisation(client: Reader, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
                options: measure.Options = DEFAULT_OPTIONS, *,
                late_allowance: timedelta = DEFAULT_LATE_ALLOWANCE) -> tuple[list[measure.Utilisation], int]:
    """`measure.utilisation` (same rows), reading final roll-ups where they exist; returns the rows and the
    number of hours measured from raw samples. A window not on whole hours is measured raw, as before."""
    measure.check_window(start, end)
    if start != floor_hour(start) or end != floor_hour(end):
        return measure.utilisation(client, flavors, start, end, options), len(hours(floor_hour(start), ceil_hour(end)))
    fingerprint = util_fingerprint(options, flavors)
    use = final_hours(coverage(client, UTIL, fingerprint, start, end), late_allowance)
    revs = {int(hour.timestamp()): rev for hour, rev in use.items()}
    slot_of = {name: i for i, name in enumerate(UTIL_FIELDS)}
    # {(tenant, flavor): {hour: five thousandths}}: one dict per series pair, no tuple per sample.
    fields: dict[tuple[str, str], dict[int, list[int | None]]] = {}
    selector = f'{{__name__="{UTIL_METRIC}", fingerprint="{fingerprint}"}}'
    width = len(UTIL_FIELDS)
    for labels, rev, values, stamps in _export(client, selector, use):
        i = slot_of.get(labels.get("field", ""))
        if i is None:
            continue
        by_hour = fields.setdefault((labels.get("tenant", ""), labels.get("flavor", "")), {})
        for value, stamp in zip(values, stamps, strict=True):
            hour = (stamp + 1) // 1000 - 3600
            if revs.get(hour) == rev:
                row = by_hour.get(hour)
                if row is None:
                    row = by_hour[hour] = [None] * width
                row[i] = int(value)
    # Thousandths back to the 0.001-quantized Decimals measure.utilisation gives (scaleb keeps 3 places);
    # a month repeats few distinct values (whole hours of whole GPUs), so each is built once.
    decimals: dict[int, Decimal] = {}
    moments: dict[int, datetime] = {}

    def dec(v: int) -> Decimal:
        out = decimals.get(v)
        if out is None:
            out = decimals[v] = Decimal(v).scaleb(-3)
        return out

    rows = []
    for (tenant, flavor), by_hour in fields.items():
        for hour, v in by_hour.items():
            if None in v:
                continue
            moment = moments.get(hour) or moments.setdefault(hour, _at(hour))
            rows.append(measure.Utilisation(moment, tenant, flavor, dec(v[0]), dec(v[1]), dec(v[2]),  # type: ignore[arg-type]
                                            dec(v[3]), dec(v[4])))  # type: ignore[arg-type]
    missing = [h for h in hours(start, end) if h not in use]
    for lower, upper in _ranges(missing):
        rows += measure.utilisation(client, flavors, lower, upper, options)
    # (hour, tenant, flavor) is unique: the dataclass order, without comparing 207,000 dataclasses.
    rows.sort(key=lambda r: (r.hour_start, r.tenant_slug, r.flavor))
    return rows, len(missing)


# -- utilisation totals, summed inside the TSDB --------------------------------------------------------
Totals = dict[tuple[str, str], tuple[Decimal, ...]]  # (tenant, flavor) -> the UTIL_FIELDS, summed


def totals_of(rows: Iterable[measure.Utilisation]) -> Totals:
    """Per (tenant, flavor): the sum of each UTIL_FIELDS field over the rows' hours."""
    acc: dict[tuple[str, str], list[Decimal]] = {}
    for row in rows:
        into = acc.setdefault((row.tenant_slug, row.flavor), [Decimal(0)] * len(UTIL_FIELDS))
        for i, name in enumerate(UTIL_FIELDS):
            into[i] += getattr(row, name)
    return {key: tuple(values) for key, values in acc.items()}


def _sum_query(fingerprint: str, revs: Sequence[int], seconds: int) -> str:
    return (f'sum by (tenant, flavor, field) (sum_over_time({{__name__="{UTIL_METRIC}", '
            f'fingerprint="{fingerprint}", rev=~"{"|".join(str(r) for r in revs)}"}}[{seconds}s]))')


def utilisation_totals(client: Reader, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
                       options: measure.Options = DEFAULT_OPTIONS, *,
                       late_allowance: timedelta = DEFAULT_LATE_ALLOWANCE) -> tuple[Totals, int]:
    """`totals_of(utilisation(...))` (the same sums, to the thousandth) with the recorded hours summed inside
    VictoriaMetrics: Python receives one value per tenant x flavor x field and query, not one per hour.
    Returns the totals and the number of whole hours measured from raw samples.

    A recorded value stands for one hour of one run (`rev`); `sum_over_time` over (t - d, t] adds every
    sample of the selected revs in that window, so a query may only name a rev over hours where it is the
    final, latest roll-up. Revs that are that for every hour of the window they cover (the usual case: each
    run rolled up hours nobody recomputed since) are summed over the whole window, many per query; a rev
    superseded for some of its hours (recomputed with --force, or first rolled up before it was final) is
    summed per contiguous range of the hours it still stands for. Sums of non-negative integers below 2**53
    are exact in a float64 whatever the order; a larger one falls back to reading the hours."""
    measure.check_window(start, end)
    if start != floor_hour(start) or end != floor_hour(end):
        return totals_of(measure.utilisation(client, flavors, start, end, options)), len(
            hours(floor_hour(start), ceil_hour(end)))
    fingerprint = util_fingerprint(options, flavors)
    by_rev = coverage_by_rev(client, UTIL, fingerprint, start, end)
    use = final_hours(_latest(by_rev), late_allowance)
    clean = sorted(_clean_revs(by_rev, use))
    plan_: list[tuple[list[int], datetime, datetime]] = [
        (clean[i:i + REV_BATCH], start, end) for i in range(0, len(clean), REV_BATCH)]
    for rev in sorted(set(use.values()) - set(clean)):
        plan_ += [([rev], a, b) for a, b in _ranges(h for h, r in use.items() if r == rev)]
    slot_of = {name: i for i, name in enumerate(UTIL_FIELDS)}
    sums: dict[tuple[str, str], list[int]] = {}
    for revs, a, b in plan_:
        for series in client.instant(_sum_query(fingerprint, revs, int((b - a).total_seconds())), b):
            i = slot_of.get(series.labels.get("field", ""))
            if i is None or not series.samples:
                continue
            value = series.samples[-1].value
            if not (value.is_finite() and value == value.to_integral_value() and 0 <= value < EXACT_LIMIT):
                # Not an exact integer sum (a partial sum may have passed 2**53): read the hours instead.
                return totals_of(utilisation(client, flavors, start, end, options,
                                             late_allowance=late_allowance)[0]), len(hours(start, end)) - len(use)
            into = sums.setdefault((series.labels.get("tenant", ""), series.labels.get("flavor", "")),
                                   [0] * len(UTIL_FIELDS))
            into[i] += int(value)
    # The per-query sums are added as Python integers (exact); thousandths back to 0.001-quantized Decimals.
    out: dict[tuple[str, str], list[Decimal]] = {
        key: [Decimal(v).scaleb(-3) for v in values] for key, values in sums.items()}
    missing = [h for h in hours(start, end) if h not in use]
    for lower, upper in _ranges(missing):
        for key, values in totals_of(measure.utilisation(client, flavors, lower, upper, options)).items():
            into_ = out.setdefault(key, [Decimal(0)] * len(UTIL_FIELDS))
            for i, value in enumerate(values):
                into_[i] += value
    return {key: tuple(values) for key, values in sorted(out.items())}, len(missing)
