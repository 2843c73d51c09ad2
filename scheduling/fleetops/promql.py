"""Activity and idle queries, built on billing's metering query layer (`billing.metering.promql`).

Pure: builds PromQL/MetricsQL text; no Django, no I/O. The slot grid, the 1 ms window shift, gap
bridging (`held(k)`), HA replica collapse (`max by (identity)`), old label names and the `pod!=""`
filter (absent and empty pod labels never match) are billing's, reused through `Queries`; this module
only adds the activity side. Every expression here can be evaluated for slot k + d (d = `shift`, in
slots) so the idle edges below compare a slot with its neighbours.

Activity at slot k is the last sample of the activity metric in slots k-N..k, i.e. the value the
exporter reported in that slot or, across a bridged gap, the one before it (the same carry-over billing
uses for HAMi shares). Signals, per allocation:

* `profiling`: `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (0..1) and `DCGM_FI_PROF_DRAM_ACTIVE` (0..1). MIG instances
  report these too. A slot is idle when BOTH are below their thresholds (a memory-bound job has low
  engine activity but high DRAM activity).
* `gpu_util`: `DCGM_FI_DEV_GPU_UTIL` (0..100) where the allocation reports no profiling metric in the
  lookback, never for MIG (not reported for MIG instances; the selector also requires `GPU_I_PROFILE=""`).

HAMi shares: a share's allocation (billing's share fraction x held slot) with the activity of its
physical device (`UUID` = `device_uuid`), since DCGM measures the device, not the container.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from billing.metering.promql import (
    DCGM_GROUP,
    DCGM_IDENTITY,
    HAMI_DEVICE_MEMORY,
    HAMI_GROUP,
    HAMI_IDENTITY,
    HAMI_MEMORY,
    SHIFT_MS,
    Queries,
    QuerySettings,
    _old_to_new,
)

GR_ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DRAM = "DCGM_FI_PROF_DRAM_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
MIB = 1024 * 1024
# GPU_UTIL is never used for MIG instances (dcgm-exporter does not report it for them; be sure anyway).
# Idle masks cover this many slots per point (exact in a float64: < 2**53).
MASK_SLOTS = 40
NOT_MIG = ', GPU_I_PROFILE=""'


@dataclass(frozen=True)
class Thresholds:
    """Idle when activity is below these (fractions 0..1; GPU_UTIL is compared as a percentage)."""

    engine: Decimal = Decimal("0.05")
    dram: Decimal = Decimal("0.05")
    gpu_util: Decimal = Decimal("0.05")

    def __post_init__(self) -> None:
        for name in ("engine", "dram", "gpu_util"):
            value = getattr(self, name)
            if not isinstance(value, Decimal) or not (0 < value <= 1):
                raise ValueError(f"{name} threshold must be a Decimal in (0, 1]")


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def _ns_filter(prefix: str, namespaces: tuple[str, ...] | None) -> str:
    """A namespace regex: every tenant namespace, or only the given ones."""
    if namespaces is not None:
        return "|".join(namespaces) or "^$"
    return f"{prefix}.+"


# MetricsQL templates (VictoriaMetrics expands them before evaluating): the old-label relabelling.
WITH_HEADER = "WITH (rl(q) = " + _old_to_new("q") + ")\n"


def with_templates(expr: str) -> str:
    return WITH_HEADER + expr


# The longest namespace list a query names inline (as a `=~` / `!~` regex). Every selector of a query repeats it
# (~17 times in the slot masks), so a list of ~185 tenants made a 56 KB query that VictoriaMetrics refused
# (-search.maxQueryLen, 16 KiB by default). A longer list is not sent: the query selects every tenant namespace
# (a prefix regex that does not grow) and `selects()` keeps the wanted ones from the answer (issue 27).
INLINE_NAMESPACES_MAX = 300


class ActivityQueries(Queries):
    """Billing's queries plus activity, memory and idle edges for one tenant selection.

    `namespaces`: only these tenant namespaces (a per-tenant threshold group); `exclude`: every tenant
    namespace except these (the fleet-default group). Both are exact names, regex-escaped by the caller.
    A short list narrows the query itself; a long one is applied to the answer only: callers keep the series
    whose namespace `selects()` accepts, whatever the query text."""

    def __init__(self, settings: QuerySettings, thresholds: Thresholds = Thresholds(), *,
                 namespaces: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> None:
        super().__init__(settings)
        self.thresholds = thresholds
        self._only = None if namespaces is None else frozenset(namespaces)
        self._not = frozenset(exclude)
        if namespaces is not None and len("|".join(namespaces)) > INLINE_NAMESPACES_MAX:
            namespaces = None  # every tenant namespace; selects() narrows
        if len("|".join(exclude)) > INLINE_NAMESPACES_MAX:
            exclude = ()
        ns = _ns_filter(settings.namespace_prefix, namespaces)
        self.ns_match = f'=~"{ns}"'
        self.ns_exclude = f', namespace!~"{"|".join(exclude)}"' if exclude else ""
        self.ns_exclude_old = f', pod_namespace!~"{"|".join(exclude)}"' if exclude else ""
        # Narrow billing's selectors to the selection (the usage metric marks an allocation as held).
        metric = settings.usage_metric
        self.dcgm_new = f'{{__name__="{metric}", namespace{self.ns_match}, pod!=""{self.ns_exclude}}}'
        self.dcgm_old = f'{{__name__="{metric}", pod_namespace{self.ns_match}, pod_name!=""{self.ns_exclude_old}}}'
        self.hami_any = (f'{{__name__=~"{HAMI_MEMORY}|hami_vgpu_core_allocated_ratio", namespace{self.ns_match}, '
                         f'pod!=""{self.ns_exclude}}}')
        self.hami_memory = f'{HAMI_MEMORY}{{namespace{self.ns_match}, pod!=""{self.ns_exclude}}}'
        self.hami_cores = f'hami_vgpu_core_allocated_ratio{{namespace{self.ns_match}, pod!=""{self.ns_exclude}}}'

    def selects(self, namespace: str) -> bool:
        """Whether a series of `namespace` in an answer belongs to this selection."""
        return (self._only is None or namespace in self._only) and namespace not in self._not

    # -- windows shifted by `shift` slots ---------------------------------------------------------
    def _win(self, slots: int, offset_slots: int) -> str:
        return f"[{slots * self.s}s] offset {offset_slots * self.s * 1000 + SHIFT_MS}ms"

    def _metric(self, metric: str, func: str, slots: int, offset_slots: int, extra: str = "",
                agg: str = "max") -> str:
        """`func` over an attributed DCGM metric, both label schemes, replicas collapsed. The old names
        are relabelled by the `rl` template of `WITH_HEADER` (queries must stay under VictoriaMetrics'
        -search.maxQueryLen, 16 KiB by default)."""
        window = self._win(slots, offset_slots)
        new = f'{func}({metric}{{namespace{self.ns_match}, pod!=""{self.ns_exclude}{extra}}}{window})'
        old = (f'rl({func}({metric}{{pod_namespace{self.ns_match}, pod_name!=""'
               f'{self.ns_exclude_old}{extra}}}{window}))')
        return f"{agg} by ({_by(DCGM_IDENTITY)}) ({new} or {old})"

    def _dcgm_rollup(self, func: str, slots: int, offset_slots: int, agg: str = "max") -> str:
        metric = self.settings.usage_metric
        return self._metric(metric, func, slots, offset_slots, agg=agg)

    def held(self, shift: int = 0) -> str:
        """1 per DCGM identity for every held slot k + shift (billing's bridging; HAMi GPUs removed)."""
        def rollup(func: str, slots: int, offset_slots: int, agg: str = "max") -> str:
            return self._dcgm_rollup(func, slots, offset_slots - shift, agg)
        return f"(({self._held(rollup)}) unless on (UUID) ({self._hami_devices(shift)}))"

    def _hami_devices(self, shift: int) -> str:
        span = 2 * self.n + 3
        inner = (f"max by (device_uuid) (present_over_time({HAMI_DEVICE_MEMORY}"
                 f"{self._win(span, -(self.n + 1) - shift)}))")
        return f'label_replace({inner}, "UUID", "$1", "device_uuid", "(.+)")'

    def _last(self, metric: str, shift: int, extra: str = "") -> str:
        return self._metric(metric, "last_over_time", self.n + 1, -shift, extra)

    def activity(self, shift: int = 0) -> str:
        """Per DCGM identity: engine activity 0..1 with a `signal` label (profiling | gpu_util)."""
        prof = self._last(GR_ENGINE, shift)
        util = f'({self._last(GPU_UTIL, shift, NOT_MIG)} / 100)'
        return (f'label_replace({prof}, "signal", "profiling", "", "") or on ({_by(DCGM_IDENTITY)}) '
                f'label_replace({util}, "signal", "gpu_util", "", "")')

    def idle_signal(self, shift: int = 0) -> str:
        """Per DCGM identity with a `signal` label, value = FB_USED MiB, for slots k + shift that are idle."""
        t = self.thresholds
        prof = (f"(({self._last(GR_ENGINE, shift)}) < {t.engine}) and on ({_by(DCGM_IDENTITY)}) "
                f"(({self._last(DRAM, shift)}) < {t.dram})")
        util = (f'((({self._last(GPU_UTIL, shift, NOT_MIG)}) < {t.gpu_util * 100}) '
                f"unless on ({_by(DCGM_IDENTITY)}) ({self._last(GR_ENGINE, shift)}))")
        idle = (f'(label_replace({prof}, "signal", "profiling", "", "") or '
                f'label_replace({util}, "signal", "gpu_util", "", ""))')
        memory = f"(({self._last(FB_USED, shift)}) or on ({_by(DCGM_IDENTITY)}) ({self.held(shift)} * 0))"
        # value := MiB held (idle x 0 + memory), labels := the idle side's (with `signal`)
        return (f"(({idle} * 0) + on ({_by(DCGM_IDENTITY)}) group_left () ({memory})) "
                f"and on ({_by(DCGM_IDENTITY)}) ({self.held(shift)})")

    def idle_masks(self, hami: bool = False) -> str:
        """Range query at step B = `MASK_SLOTS` x s: per allocation (and signal), a bit mask of the idle
        slots of the block ending at t (bit i = the slot whose end τ has (τ / s) mod MASK_SLOTS = i),
        and, as `part="peak"`, the peak MiB held in those idle slots. The idle expression is evaluated
        once per slot (one subquery each); only blocks with an idle slot come back."""
        s, block = self.s, self.s * MASK_SLOTS
        here = self.hami_idle_signal(0) if hami else self.idle_signal(0)
        return with_templates(
            f"WITH (e = ({here}))\n"
            f'label_replace(sum_over_time((e * 0 + 2 ^ ((time() / {s}) % {MASK_SLOTS}))[{block}s:{s}s]), '
            f'"part", "mask", "", "") or '
            f'label_replace(max_over_time(e[{block}s:{s}s]), "part", "peak", "", "")')

    # -- the fast path: per-series slot masks, no aggregation (see measure.dcgm_idle_runs) -------------
    def _sels(self, metric: str, extra: str = "") -> tuple[str, str]:
        new = f'{metric}{{namespace{self.ns_match}, pod!=""{self.ns_exclude}{extra}}}'
        old = f'{metric}{{pod_namespace{self.ns_match}, pod_name!=""{self.ns_exclude_old}{extra}}}'
        return new, old

    def slot_masks(self) -> str:
        """Range query at step B = MASK_SLOTS x s. Per raw series (replicas and label schemes kept apart:
        the caller merges them) and block ending at t, a bit mask of its slots (bit i = slot
        t/s - MASK_SLOTS + i): `part="present"` — the usage metric has a sample in the slot;
        `part="profiling"` — engine AND DRAM activity below their thresholds; `part="gpu_util"` — GPU_UTIL
        below its threshold where the series has no engine activity (never MIG); and `part="peak"`, the
        block's peak FB_USED where some sample in it was below a threshold. Every expression inside the
        subqueries is one rollup of one raw series per slot: no joins across series, no `max by`."""
        s, block, t = self.s, self.s * MASK_SLOTS, self.thresholds
        one = f"[{s}s] offset {SHIFT_MS}ms"
        whole = f"[{block}s] offset {SHIFT_MS}ms"
        parts = []
        for scheme in (0, 1):
            fb = self._sels(self.settings.usage_metric)[scheme]
            mem = self._sels(FB_USED)[scheme]
            gr, dram = self._sels(GR_ENGINE)[scheme], self._sels(DRAM)[scheme]
            util = self._sels(GPU_UTIL, NOT_MIG)[scheme]
            inner = {
                "present": f"present_over_time({fb}{one}) * bit",
                "profiling": (f"((last_over_time({gr}{one}) < {t.engine}) and "
                              f"(last_over_time({dram}{one}) < {t.dram})) * 0 + bit"),
                "gpu_util": (f"((last_over_time({util}{one}) < {t.gpu_util * 100}) unless "
                             f"last_over_time({gr}{one})) * 0 + bit"),
            }
            for part, expr in inner.items():
                parts.append(f'label_replace(sum_over_time(({expr})[{block}s:{s}s]), "part", "{part}", "", "")')
            low = (f"((min_over_time({gr}{whole}) < {t.engine}) or "
                   f"(min_over_time({util}{whole}) < {t.gpu_util * 100}))")
            parts.append(f'label_replace(max_over_time({mem}{whole}) and {low}, "part", "peak", "", "")')
        return (f"WITH (bit = 2 ^ (((time() / {s}) - 1) % {MASK_SLOTS}))\n" + " or ".join(parts))

    def hami_devices_in(self, window_seconds: int) -> str:
        return f"group by (device_uuid) (last_over_time({HAMI_DEVICE_MEMORY}[{window_seconds}s]))"

    # -- HAMi ---------------------------------------------------------------------------------------
    def _device_last(self, metric: str, shift: int, extra: str = "") -> str:
        """Device-level activity (any series of the GPU, attributed or not), keyed by `device_uuid`."""
        window = self._win(self.n + 1, -shift)
        new = f'max by (UUID) (last_over_time({metric}{{UUID!=""{extra}}}{window}))'
        old = f'max by (uuid) (last_over_time({metric}{{uuid!=""{extra}}}{window}))'
        both = f'{new} or label_replace({old}, "UUID", "$1", "uuid", "(.+)")'
        return f'label_replace(max by (UUID) ({both}), "device_uuid", "$1", "UUID", "(.+)")'

    def hami_held(self, shift: int = 0) -> str:
        def rollup(func: str, slots: int, offset_slots: int, agg: str = "max") -> str:
            return self._hami_rollup(func, slots, offset_slots - shift, agg)
        return f"({self._held(rollup)})"

    def hami_device_idle(self, shift: int = 0) -> str:
        t = self.thresholds
        prof = (f"(({self._device_last(GR_ENGINE, shift)}) < {t.engine}) and on (device_uuid) "
                f"(({self._device_last(DRAM, shift)}) < {t.dram})")
        util = (f"(({self._device_last(GPU_UTIL, shift)}) < {t.gpu_util * 100}) unless on (device_uuid) "
                f"({self._device_last(GR_ENGINE, shift)})")
        return (f'max by (device_uuid, signal) (label_replace({prof}, "signal", "profiling", "", "") or '
                f'label_replace({util}, "signal", "gpu_util", "", ""))')

    def hami_idle_signal(self, shift: int = 0) -> str:
        """Per HAMi share with `signal`, value = allocated MiB, for slots k + shift whose device is idle."""
        window = self._win(self.n + 1, -shift)
        memory = f"(max by ({_by(HAMI_IDENTITY)}) (last_over_time({self.hami_memory}{window})) / {MIB})"
        held = self.hami_held(shift)
        device_type = (f"group by (device_uuid, device_type) "
                       f"(last_over_time({HAMI_DEVICE_MEMORY}{self._win(self.n + 1, -shift)}))")
        return (f"((({memory}) and on ({_by(HAMI_IDENTITY)}) ({held})) * on (device_uuid) group_left (signal) "
                f"(({self.hami_device_idle(shift)}) * 0 + 1) * on (device_uuid) group_left (device_type) "
                f"{device_type})")

    # -- hourly utilisation, the fast path: slot work on the activity series, aggregation at hourly resolution --
    def _hourly_per_identity(self, metric: str, scale: str = "", extra: str = "") -> str:
        """Per DCGM identity: Σ over its held slots in the hour ending at t of `metric`'s last value in
        slots k-N..k (`scale`d). Held is billing's bridging on the metric's own samples (the activity
        metrics come from the same scrapes as the usage metric). Replicas and label schemes are collapsed
        per slot (`max`/`min by` identity inside the subquery), as billing's held(k) collapses them: a sum
        per raw series collapsed afterwards would miss the slots one HA replica has and another lacks
        (tests/fleetops/test_fast_path_differential.py)."""
        s, n = self.s, self.n
        value = f"({self._metric(metric, 'last_over_time', n + 1, 0, extra)}){scale}"
        last = f"floor(({self._metric(metric, 'tlast_over_time', n + 1, 0, extra)}) / {s})"
        first = f"floor(({self._metric(metric, 'tfirst_over_time', n + 1, -n, extra, 'min')}) / {s})"
        return f"sum_over_time(((({first} - {last}) <= bool {n + 1}) * {value})[3600s:{s}s])"

    def _not_hami_hourly(self) -> str:
        inner = f"group by (device_uuid) (last_over_time({HAMI_DEVICE_MEMORY}[3600s] offset {SHIFT_MS}ms))"
        return f'label_replace({inner}, "UUID", "$1", "device_uuid", "(.+)")'

    def active_hourly_fast(self) -> str:
        """Σ activity over held slots per (tenant namespace, model, MIG profile) in the hour ending at t:
        engine activity where the allocation reports it, else GPU_UTIL / 100 (never MIG)."""
        gr = self._hourly_per_identity(GR_ENGINE)
        util = self._hourly_per_identity(GPU_UTIL, " / 100", NOT_MIG)
        return (f"sum by ({_by(DCGM_GROUP)}) ((({gr}) or on ({_by(DCGM_IDENTITY)}) ({util})) "
                f"unless on (UUID) ({self._not_hami_hourly()}))")

    def memory_hourly_fast(self) -> str:
        fb = self._hourly_per_identity(FB_USED)
        return f"sum by ({_by(DCGM_GROUP)}) (({fb}) unless on (UUID) ({self._not_hami_hourly()}))"

    # -- hourly utilisation (range query, step 1h, at hour ends) --------------------------------------
    def active_hourly_slots(self) -> str:
        """Σ activity over held slots per (tenant namespace, model, MIG profile, signal) in the hour."""
        per_slot = f"(({self.held()}) * on ({_by(DCGM_IDENTITY)}) group_left (signal) ({self.activity()}))"
        return f"sum by ({_by(DCGM_GROUP)}) (sum_over_time({per_slot}[3600s:{self.s}s]))"

    def memory_hourly_slots(self) -> str:
        """Σ FB_USED MiB over held slots per (tenant namespace, model, MIG profile) in the hour."""
        per_slot = f"(({self.held()}) * on ({_by(DCGM_IDENTITY)}) ({self._last(FB_USED, 0)}))"
        return f"sum by ({_by(DCGM_GROUP)}) (sum_over_time({per_slot}[3600s:{self.s}s]))"

    def hami_active_hourly_share_slots(self) -> str:
        """Σ share x device activity over held slots per (tenant namespace, HAMi device type)."""
        device_act = (f"(({self._device_last(GR_ENGINE, 0)}) or on (device_uuid) "
                      f"({self._device_last(GPU_UTIL, 0)} / 100))")
        per_slot = f"(({self.hami_share_slot()}) * on (device_uuid) group_left () ({device_act}))"
        device_type = (f"group by (device_uuid, device_type) "
                       f"(last_over_time({HAMI_DEVICE_MEMORY}[3600s] offset {SHIFT_MS}ms))")
        return (f"sum by ({_by(HAMI_GROUP)}) (sum_over_time({per_slot}[3600s:{self.s}s])"
                f" * on (device_uuid) group_left (device_type) {device_type})")

    def hami_memory_hourly_slots(self) -> str:
        window = self._win(self.n + 1, 0)
        memory = f"(max by ({_by(HAMI_IDENTITY)}) (last_over_time({self.hami_memory}{window})) / {MIB})"
        per_slot = f"(({memory}) and on ({_by(HAMI_IDENTITY)}) ({self.hami_held()}))"
        device_type = (f"group by (device_uuid, device_type) "
                       f"(last_over_time({HAMI_DEVICE_MEMORY}[3600s] offset {SHIFT_MS}ms))")
        return (f"sum by ({_by(HAMI_GROUP)}) (sum_over_time({per_slot}[3600s:{self.s}s])"
                f" * on (device_uuid) group_left (device_type) {device_type})")
