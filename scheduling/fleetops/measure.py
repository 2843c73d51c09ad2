"""Utilisation and idle runs per allocation, measured inside the TSDB. Pure: no Django.

* `utilisation(...)`: per (hour, tenant, flavor): allocated seconds exactly as billing measures them
  (`billing.metering.usage.measure_report`, unchanged), active seconds (allocation x activity, see
  `promql`), and MiB-seconds of memory held.
* `idle_runs(...)`: every contiguous idle run of an allocation (DCGM identity or HAMi share) in a window.
  The TSDB evaluates the idle condition once per slot and returns bit masks per block of `MASK_SLOTS`
  slots; Python joins them into runs with big-integer bit operations (no per-slot Python loop).
  Whole GPUs and MIG instances: `dcgm_idle_runs` (per-series masks, bridging in Python). HAMi shares:
  `_runs_of` (the idle expression with billing's bridging, evaluated in the TSDB). Minimum durations are
  applied by the caller (they are per tenant). The peak memory of a run is the maximum over the blocks
  wholly inside it (a run inside fewer blocks: the blocks it touches).

Slot k covers [k·s - s, k·s) (billing's grid); a range query at step s evaluated at t = k·s reports slot k.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing.metering import usage as billing_usage
from billing.metering.promql import DCGM_IDENTITY, HAMI_IDENTITY, QuerySettings
from billing.metering.usage import HAMI, MIG, FlavorIndex, FlavorSpec, MeteringInputError, RangeQuerier

from .promql import MASK_SLOTS, ActivityQueries, Thresholds, with_templates

HOUR = timedelta(hours=1)
# A quarter at most per call: the masks of a window are held in memory (~1 bit per slot and allocation).
MAX_WINDOW = timedelta(days=92)
TENANT_PREFIX = billing_usage.TENANT_PREFIX
# VictoriaMetrics refuses range answers over -search.maxPointsPerTimeseries (30,000 by default).
EDGE_POINT_BUDGET = 20_000


@dataclass(frozen=True)
class Options:
    scrape_interval: int = billing_usage.DEFAULT_SCRAPE_INTERVAL
    max_gap_scrapes: int = billing_usage.DEFAULT_MAX_GAP_SCRAPES
    share_rule: str = "max"
    usage_metric: str = billing_usage.DEFAULT_USAGE_METRIC
    dialect: str = "metricsql"

    def query_settings(self) -> QuerySettings:
        try:
            return QuerySettings(self.scrape_interval, self.max_gap_scrapes, self.usage_metric, self.share_rule,
                                 TENANT_PREFIX, self.dialect)
        except ValueError as exc:
            raise MeteringInputError("settings", str(exc)) from exc


@dataclass(frozen=True, order=True)
class Utilisation:
    hour_start: datetime
    tenant_slug: str
    flavor: str
    allocated_seconds: Decimal  # billing's unit_seconds
    allocated_gpu_equivalent_seconds: Decimal
    active_seconds: Decimal
    active_gpu_equivalent_seconds: Decimal
    memory_mib_seconds: Decimal

    @property
    def efficiency(self) -> Decimal | None:
        return None if not self.allocated_seconds else self.active_seconds / self.allocated_seconds


@dataclass(frozen=True)
class ThresholdGroup:
    """Thresholds for a set of tenant namespaces (None = every tenant not in another group)."""

    thresholds: Thresholds
    namespaces: tuple[str, ...] | None = None


@dataclass(frozen=True, order=True)
class IdleRun:
    start: datetime
    tenant_slug: str
    namespace: str
    pod: str
    container: str
    device: str  # GPU UUID (the parent GPU for a MIG instance; the physical GPU for a HAMi share)
    mig_instance: str  # GPU_I_ID, "" when not MIG
    flavor: str
    mode: str
    signal: str  # profiling | gpu_util
    end: datetime  # exclusive; the window end for an ongoing run
    ongoing: bool
    idle_seconds: int
    memory_mib: Decimal  # peak held while idle
    weight: Decimal = field(compare=False)

    @property
    def gpu_equivalent_seconds(self) -> Decimal:
        return Decimal(self.idle_seconds) * self.weight


def _tenant(namespace: str) -> str | None:
    slug = namespace.removeprefix(TENANT_PREFIX)
    return slug if namespace.startswith(TENANT_PREFIX) and slug else None


def _hour_start(timestamp: Decimal) -> datetime:
    return datetime.fromtimestamp(int(timestamp), tz=UTC) - HOUR


def utilisation(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
                options: Options = Options(), *, chunk_hours: int = 24) -> list[Utilisation]:
    """Per (hour, tenant, flavor) in [start, end) (whole hours) with any allocation."""
    check_window(start, end)
    report = billing_usage.measure_report(
        client, flavors, start, end, scrape_interval=options.scrape_interval,
        max_gap_scrapes=options.max_gap_scrapes, share_rule=options.share_rule,
        usage_metric=options.usage_metric, chunk_hours=chunk_hours, dialect=options.dialect)
    index = FlavorIndex(flavors)
    weights = {f.name: f.weight for f in flavors}
    modes = {f.name: f.mode for f in flavors}
    queries = ActivityQueries(options.query_settings())
    s = Decimal(options.scrape_interval)
    active: dict[tuple[datetime, str, str], Decimal] = defaultdict(Decimal)
    memory: dict[tuple[datetime, str, str], Decimal] = defaultdict(Decimal)
    chunk_hours = max(1, min(chunk_hours, billing_usage.SUBQUERY_POINT_BUDGET * options.scrape_interval // 3600))
    plan = ((with_templates(queries.active_hourly_fast()), active, False),
            (with_templates(queries.memory_hourly_fast()), memory, False),
            (with_templates(queries.hami_active_hourly_share_slots()), active, True),
            (with_templates(queries.hami_memory_hourly_slots()), memory, True))
    cursor = start
    while cursor < end:
        upper = min(cursor + timedelta(hours=chunk_hours), end)
        for query, into, hami in plan:
            for series in client.range(query, cursor + HOUR, upper, 3600):
                tenant = _tenant(series.labels.get("namespace", ""))
                flavor = (index.hami(series.labels.get("device_type", "")) if hami else
                          index.dcgm(series.labels.get("modelName", ""), series.labels.get("GPU_I_PROFILE", "")))
                if tenant is None or flavor is None:
                    continue  # unmatched allocations are reported by billing's measurement
                for sample in series.samples:
                    hour = _hour_start(sample.timestamp)
                    if start <= hour < end and sample.value.is_finite():
                        into[(hour, tenant, flavor.name)] += sample.value * s
        cursor = upper
    out = []
    for row in report.samples:
        key = (row.hour_start, row.tenant_slug, row.flavor)
        act = active.get(key, Decimal(0)).quantize(billing_usage.SECONDS_QUANTUM)
        # HAMi: billing's unit seconds already are GPU fractions (the measured share): weight 1.
        weight = Decimal(1) if modes[row.flavor] == HAMI else weights[row.flavor]
        out.append(Utilisation(row.hour_start, row.tenant_slug, row.flavor, row.unit_seconds,
                               row.gpu_equivalent_seconds, act, (act * weight).quantize(billing_usage.SECONDS_QUANTUM),
                               memory.get(key, Decimal(0)).quantize(billing_usage.SECONDS_QUANTUM)))
    return sorted(out)


def _slot_floor(moment: datetime, s: int) -> datetime:
    ts = int(moment.timestamp())
    return datetime.fromtimestamp(ts - ts % s, tz=UTC)


def check_window(start: datetime, end: datetime) -> None:
    for name, moment in (("start", start), ("end", end)):
        if not isinstance(moment, datetime) or moment.tzinfo is None or moment.utcoffset() != timedelta(0):
            raise MeteringInputError(name, "must be a UTC datetime")
    if start >= end:
        raise MeteringInputError("end", "must be after start")
    if end - start > MAX_WINDOW:
        raise MeteringInputError("end", f"the window may span at most {MAX_WINDOW.days} days")
    if start.year < 2000:
        raise MeteringInputError("start", "must be in the year 2000 or later")


def idle_runs(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime,
              options: Options = Options(), groups: Iterable[ThresholdGroup] = (ThresholdGroup(Thresholds()),),
              ) -> list[IdleRun]:
    """Every idle run of every allocation in [start, end) (floored to the slot grid), any length."""
    check_window(start, end)
    s = options.scrape_interval
    settings = options.query_settings()
    start, end = _slot_floor(start, s), _slot_floor(end, s)
    if start >= end:
        raise MeteringInputError("end", f"window is shorter than one scrape interval ({s} s)")
    index = FlavorIndex(flavors)
    groups = list(groups)
    named = tuple(ns for g in groups if g.namespaces is not None for ns in g.namespaces)
    runs: list[IdleRun] = []
    hami_devices = _hami_devices(client, ActivityQueries(settings), start, end)
    for group in groups:
        if group.namespaces is not None and not group.namespaces:
            continue
        queries = ActivityQueries(settings, group.thresholds, namespaces=group.namespaces,
                                  exclude=named if group.namespaces is None else ())
        runs += dcgm_idle_runs(client, queries, index, start, end, options, hami_devices)
        if hami_devices:
            runs += _runs_of(client, queries, index, start, end, s, True)
    return sorted(runs)


def _runs_of(client: RangeQuerier, queries: ActivityQueries, index: FlavorIndex, start: datetime, end: datetime,
             s: int, hami: bool) -> list[IdleRun]:
    identity = HAMI_IDENTITY if hami else DCGM_IDENTITY
    query = queries.idle_masks(hami)
    block = s * MASK_SLOTS
    masks: dict[tuple[tuple[str, str], ...], dict[int, int]] = defaultdict(dict)
    peaks: dict[tuple[tuple[str, str], ...], dict[int, Decimal]] = defaultdict(dict)
    labels_of: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    window_start, window_end = int(start.timestamp()), int(end.timestamp())
    first_t = window_start - window_start % block + block
    last_t = -(-window_end // block) * block
    cursor = first_t
    while cursor <= last_t:
        upper = min(cursor + block * max(1, min(EDGE_POINT_BUDGET // MASK_SLOTS - 2, 86400 // block)), last_t)
        for series in client.range(query, _at(cursor), _at(upper), block):
            if not queries.selects(series.labels.get("namespace", "")):  # see dcgm_idle_bits
                continue
            k = tuple((name, series.labels.get(name, "")) for name in (*identity, "signal", "device_type"))
            labels_of.setdefault(k, dict(series.labels))
            into = masks[k] if series.labels.get("part") == "mask" else peaks[k]
            for sample in series.samples:
                into[int(sample.timestamp)] = int(sample.value) if into is masks[k] else sample.value
        cursor = upper + block
    out = []
    for k, blocks in masks.items():
        labels = labels_of[k]
        tenant = _tenant(labels.get("namespace", ""))
        if hami:
            flavor = index.hami(labels.get("device_type", ""))
        else:
            flavor = index.dcgm(labels.get("modelName", ""), labels.get("GPU_I_PROFILE", ""))
        if tenant is None or flavor is None:
            continue
        for run_start, run_end, peak in _runs_from_masks(blocks, peaks[k], s, window_start, window_end):
            out.append(IdleRun(
                start=datetime.fromtimestamp(run_start, tz=UTC), tenant_slug=tenant,
                namespace=labels.get("namespace", ""), pod=labels.get("pod", ""),
                container=labels.get("container", labels.get("container_index", "")),
                device=labels.get("device_uuid" if hami else "UUID", ""),
                mig_instance=labels.get("GPU_I_ID", "") if flavor.mode == MIG else "",
                flavor=flavor.name, mode=flavor.mode, signal=labels.get("signal", ""),
                end=datetime.fromtimestamp(run_end, tz=UTC), ongoing=run_end >= window_end,
                idle_seconds=run_end - run_start, memory_mib=peak, weight=flavor.weight))
    return out


def _at(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, tz=UTC)


def _runs_from_masks(blocks: dict[int, int], peaks: dict[int, Decimal], s: int, window_start: int,
                     window_end: int) -> Iterable[tuple[int, int, Decimal]]:
    """(start, end exclusive, peak MiB) of each idle run, clipped to the window, from per-block masks."""
    full = (1 << MASK_SLOTS) - 1
    run_start: int | None = None
    run_end = 0
    peak = Decimal(0)
    for t in sorted(blocks):
        mask, block_start = blocks[t], t - s * MASK_SLOTS
        # Slot ending at τ has bit (τ / s) mod MASK_SLOTS; the block's slots end at block_start + s .. t.
        rotate = ((block_start // s) + 1) % MASK_SLOTS
        ordered = ((mask >> rotate) | (mask << (MASK_SLOTS - rotate))) & full  # bit j = j-th slot of block
        j = 0
        while j < MASK_SLOTS:
            if not ordered >> j & 1:
                nxt = (ordered >> j)
                if not nxt:
                    break
                j += (nxt & -nxt).bit_length() - 1
                continue
            ones = (~ordered >> j) & full
            length = (ones & -ones).bit_length() - 1 if ones else MASK_SLOTS - j
            a = max(block_start + j * s, window_start)
            b = min(block_start + (j + length) * s, window_end)
            j += length
            if a >= b:
                continue
            if run_start is not None and a == run_end:
                run_end = b
                peak = max(peak, peaks.get(t, Decimal(0)))
                continue
            if run_start is not None:
                yield run_start, run_end, peak
            run_start, run_end, peak = a, b, peaks.get(t, Decimal(0))
    if run_start is not None:
        yield run_start, run_end, peak


OLD_NAMES = {"pod_namespace": "namespace", "pod_name": "pod", "container_name": "container", "uuid": "UUID"}


def _hami_devices(client: RangeQuerier, queries: ActivityQueries, start: datetime, end: datetime) -> set[str]:
    """GPUs HAMi manages in the window (their DCGM series are device-level, never an allocation)."""
    seconds = int((end - start).total_seconds())
    found = client.range(queries.hami_devices_in(seconds + 3600), end, end, 60)
    return {series.labels.get("device_uuid", "") for series in found}


def _identity(labels: dict[str, str]) -> tuple[str, ...]:
    named = {OLD_NAMES.get(k, k): v for k, v in labels.items()}
    return tuple(named.get(name, "") for name in DCGM_IDENTITY)


@dataclass
class SlotBits:
    """One DCGM allocation's final idle slots (after replica merge and gap bridging) in a window.

    Bit i of `idle` / `profiling` is global slot `base + i` (slot g covers [g·s, (g+1)·s)); `profiling` is
    the subset of `idle` whose sample was below the profiling thresholds (the rest is the GPU_UTIL
    fallback). `peaks`: block end (unix s) -> peak FB_USED MiB of a low sample in that block, kept only for
    blocks holding an idle slot (no other block can touch a run). A slot's bit does not depend on the window
    it was measured in (bridging reads at most N + 1 slots beyond it and the query reads a block of context
    on each side), so bits measured over different windows can be OR-ed together (`rollup`)."""

    base: int
    idle: int
    profiling: int
    peaks: dict[int, Decimal] = field(default_factory=dict)

    def merge(self, other: SlotBits) -> None:
        """OR `other` into this (rebasing to the lower base); peaks of one block: the larger."""
        if other.base < self.base:
            shift = self.base - other.base
            self.idle, self.profiling, self.base = self.idle << shift, self.profiling << shift, other.base
        shift = other.base - self.base
        self.idle |= other.idle << shift
        self.profiling |= other.profiling << shift
        for t, value in other.peaks.items():
            self.peaks[t] = max(self.peaks.get(t, value), value)


def dcgm_idle_runs(client: RangeQuerier, queries: ActivityQueries, index: FlavorIndex, start: datetime,
                   end: datetime, options: Options, skip_devices: set[str] = frozenset()) -> list[IdleRun]:  # type: ignore[assignment]
    """Idle runs of whole GPUs and MIG instances from per-series slot masks (`promql.slot_masks`)."""
    bits = dcgm_idle_bits(client, queries, start, end, options)
    return runs_from_bits(bits, index, options, skip_devices, int(end.timestamp()))


def dcgm_idle_bits(client: RangeQuerier, queries: ActivityQueries, start: datetime, end: datetime,
                   options: Options) -> dict[tuple[str, ...], SlotBits]:
    """Per DCGM identity: its idle slots inside [start, end) (`SlotBits`), every allocation (HAMi GPUs
    and unknown flavors included: the caller filters).

    The TSDB reports, per raw series and block, which slots have a sample and which are idle; here the
    copies of an allocation (HA replicas, old label names) are OR-ed together, gaps of at most N missed
    scrapes between two samples are bridged with the state of the sample before them (billing's bridging
    and the last-value carry). The window is widened by one block on both sides so bridging at its edges
    sees the samples beyond them."""
    s, n = options.scrape_interval, options.max_gap_scrapes
    block = s * MASK_SLOTS
    window_start, window_end = int(start.timestamp()), int(end.timestamp())
    first_t = window_start - window_start % block + block  # end of the block holding the first slot
    last_t = -(-window_end // block) * block
    q_first, q_last = first_t - block, last_t + block
    base = q_first // s - MASK_SLOTS  # global slot index of bit 0 (one per block: MASK_SLOTS // 8 bytes)
    width = MASK_SLOTS // 8
    # Per allocation and part: {byte offset of a block: its mask}, copies OR-ed. Each allocation's bit
    # string is then built over its own span only (a pod lives hours; a month-wide buffer per pod and part
    # held ~1 GB for a month of 1,000 GPUs with daily jobs).
    parts: dict[tuple[str, ...], dict[str, dict[int, int]]] = {}
    peaks: dict[tuple[str, ...], dict[int, Decimal]] = defaultdict(dict)
    query = queries.slot_masks()
    # The subqueries' slots count against -search.maxPointsPerTimeseries (30,000 by default) too.
    # ... and a day per query keeps each well inside -search.maxQueryDuration (30 s by default) on a busy TSDB.
    per_query = max(1, min(EDGE_POINT_BUDGET // MASK_SLOTS - 2, 86400 // block))
    cursor = q_first
    while cursor <= q_last:
        upper = min(cursor + block * per_query, q_last)
        for series in client.range(query, _at(cursor), _at(upper), block):
            key = _identity(dict(series.labels))
            if not queries.selects(key[0]):  # a long namespace list is applied here, not in the query
                continue
            part = series.labels.get("part", "")
            if part == "peak":
                into = peaks[key]
                for sample in series.samples:
                    t = int(sample.timestamp)
                    into[t] = max(into.get(t, sample.value), sample.value)
                continue
            blocks = parts.setdefault(key, {}).setdefault(part, {})
            for sample in series.samples:
                offset = (int(sample.timestamp) // s - MASK_SLOTS - base) // 8
                blocks[offset] = blocks.get(offset, 0) | int(sample.value)
        cursor = upper + block
    out: dict[tuple[str, ...], SlotBits] = {}
    for key, by_part in parts.items():
        offsets = [offset for blocks in by_part.values() for offset in blocks]
        low, size = min(offsets), max(offsets) + width - min(offsets)
        ints = {part: _bits(blocks, low, size, width) for part, blocks in by_part.items()}
        key_base = base + low * 8  # global slot index of bit 0 of this allocation's bit strings
        present, prof = ints.get("present", 0), ints.get("profiling", 0)
        idle = (prof | ints.get("gpu_util", 0)) & present
        idle |= _bridged_idle(present, idle, n)
        lo, hi = max(window_start // s - key_base, 0), min(window_end // s - key_base, size * 8)
        idle &= ((1 << hi) - 1) ^ ((1 << lo) - 1) if hi > lo else 0  # slot bits inside the window
        if not idle:
            continue
        held = peaks.get(key, {})
        out[key] = SlotBits(key_base, idle, prof & idle,
                            {t: v for t, v in held.items() if _block_bits(idle, key_base, t, s)})
    return out


def _block_bits(bits: int, base: int, block_end: int, s: int) -> int:
    """The MASK_SLOTS bits of the block ending at `block_end` (bit j = its j-th slot)."""
    first = block_end // s - MASK_SLOTS - base
    if first < 0:
        return (bits << -first) & ((1 << MASK_SLOTS) - 1)
    return (bits >> first) & ((1 << MASK_SLOTS) - 1)


def runs_from_bits(bits: dict[tuple[str, ...], SlotBits], index: FlavorIndex, options: Options,
                   skip_devices: set[str] | frozenset[str], window_end: int, min_slots: int = 0) -> list[IdleRun]:
    """The idle runs of allocations' idle slots (runs reaching `window_end` are ongoing), those of at least
    `min_slots` slots only. HAMi-managed GPUs (`skip_devices`) and allocations of unknown tenants or flavors
    are left out."""
    s = options.scrape_interval
    block = s * MASK_SLOTS
    out = []
    for key, slot_bits in bits.items():
        who = allocation(key, index, skip_devices)
        if who is None:
            continue
        key_base, prof = slot_bits.base, slot_bits.profiling
        for first, length in _ones(slot_bits.idle):
            if length < min_slots:
                continue
            run_start, run_end = (key_base + first) * s, (key_base + first + length) * s
            run_bits = ((1 << length) - 1) << first
            out.append(idle_run(who, run_start, run_end, bool(prof & run_bits), window_end,
                                _peak(slot_bits.peaks, run_start, run_end, block)))
    return out


def allocation(key: tuple[str, ...], index: FlavorIndex,
               skip_devices: set[str] | frozenset[str]) -> tuple[dict[str, str], str, FlavorSpec] | None:
    """(labels, tenant, flavor) of a DCGM identity; None for HAMi-managed GPUs, unknown tenants or flavors."""
    labels = dict(zip(DCGM_IDENTITY, key, strict=True))
    tenant = _tenant(labels["namespace"])
    flavor = index.dcgm(labels["modelName"], labels["GPU_I_PROFILE"])
    if tenant is None or flavor is None or labels["UUID"] in skip_devices:
        return None
    return labels, tenant, flavor


def idle_run(who: tuple[dict[str, str], str, FlavorSpec], run_start: int, run_end: int, profiling: bool,
             window_end: int, peak: Decimal) -> IdleRun:
    labels, tenant, flavor = who
    return IdleRun(
        start=_at(run_start), tenant_slug=tenant, namespace=labels["namespace"], pod=labels["pod"],
        container=labels["container"], device=labels["UUID"],
        mig_instance=labels["GPU_I_ID"] if flavor.mode == MIG else "", flavor=flavor.name,
        mode=flavor.mode, signal="profiling" if profiling else "gpu_util", end=_at(run_end),
        ongoing=run_end >= window_end, idle_seconds=run_end - run_start, memory_mib=peak, weight=flavor.weight)


def _bits(blocks: dict[int, int], low: int, size: int, width: int) -> int:
    """One integer from per-block masks keyed by byte offset (blocks are `width` bytes, never overlapping)."""
    buf = bytearray(size)
    for offset, mask in blocks.items():
        buf[offset - low:offset - low + width] = mask.to_bytes(width, "little")
    return int.from_bytes(buf, "little")


def _bridged_idle(present: int, idle: int, n: int) -> int:
    """Missed slots inside a gap of at most n between two samples, idle when the sample before was."""
    if n <= 0 or not present:
        return 0
    missing = ~present
    bridged = 0
    for i in range(1, n + 1):  # sample i slots before, and one at most n + 1 - i slots after
        ahead = 0
        for j in range(1, n + 2 - i):
            ahead |= present >> j
        bridged |= (present << i) & ahead
    bridged &= missing
    out, remaining = 0, bridged
    for i in range(1, n + 1):  # the nearest sample before decides the slot's state
        hit = remaining & (present << i)
        out |= hit & (idle << i)
        remaining &= ~hit
    return out


def _ones(x: int) -> Iterable[tuple[int, int]]:
    """(first bit, length) of every run of ones, lowest first."""
    pos = 0
    while x:
        skip = (x & -x).bit_length() - 1
        x >>= skip
        pos += skip
        length = (~x & (x + 1)).bit_length() - 1
        yield pos, length
        x >>= length
        pos += length


def _peak(peaks: dict[int, Decimal], run_start: int, run_end: int, block: int) -> Decimal:
    """Peak MiB over the blocks wholly inside the run; a run inside fewer blocks takes the ones it touches."""
    inside = [v for t, v in peaks.items() if run_start <= t - block and t <= run_end]
    touching = [v for t, v in peaks.items() if t - block < run_end and t > run_start]
    return max(inside or touching or [Decimal(0)])
