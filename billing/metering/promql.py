"""The PromQL/MetricsQL that measures held GPU time per (tenant namespace, kind, hour) inside the TSDB.

Grid. Time is cut into slots of one scrape interval `s`, aligned to the epoch: slot k = [k·s - s, k·s),
closed on the left. A gauge sample at t reports a value that holds from t until the next sample (the TSDB's
own instant-vector semantics), so it belongs to [t, t + s): a sample stamped exactly on a boundary k·s is
in the slot that STARTS there. (The first version used (k·s - s, k·s], so with aligned scrapes, e.g.
vmagent's `scrape_align_interval` or exporters stamping whole seconds, every run moved one interval back
and a job first scraped at 00:00:00 on the 1st was billed 30 s to the previous month.)

A series *occupies* slot k when it has at least one raw sample in it: `present_over_time(x[s] offset 1ms)`
evaluated at t = k·s. Rollup windows are left-open, right-closed, (t - d, t], in VictoriaMetrics and
Prometheus ≥ 3; timestamps are whole milliseconds, so the window shifted back by 1 ms,
(k·s - s - 1ms, k·s - 1ms], holds exactly the samples of [k·s - s, k·s). Every rollup below carries that
1 ms (`SHIFT_MS`) on top of its slot offset. A steady scraper puts exactly one sample in every slot
(scrapes are `s` apart), so "first to last sample plus one interval" equals "first to last occupied slot,
inclusive", counted in slots, at every scrape phase, 0 included.

Gap bridging. With at most N missed scrapes tolerated, an empty slot k is still *held* when there are
occupied slots a < k < b with b - a ≤ N + 1 (the empty run between them is at most N slots long).
That condition is not a product of two one-sided lookups (back ≤ N and ahead ≤ N would accept a run of
2N empty slots), but it is an OR of N such products:

    held(k) = occ(k)  OR  OR over i=1..N of [ any occ in k-i..k-1  AND  any occ in k+1..k+N+1-i ]

(⇒: take i = k - a, then b - k ≤ N + 1 - i. ⇐: the two witnesses are at most N + 1 apart.)
Each "any occ in a slot range" is one `present_over_time` with a window of that many slots and an
offset: k-i..k-1 is `[i·s] offset s`, k+1..k+j is `[j·s] offset -j·s` (plus the 1 ms; a negative offset looks ahead;
VictoriaMetrics supports it, Prometheus since 2.33). So held(k) is a plain instant expression, and
`sum_over_time(held[1h:s])` at the end of an hour counts the held slots of that hour exactly (the
subquery evaluates at the 3600/s aligned slot ends inside the left-open hour). Seconds = count x s.

MetricsQL shortcut. VictoriaMetrics has `tlast_over_time`/`tfirst_over_time` (timestamps of the last/first
raw sample in a window). With a = slot of the last sample in k-N..k and b = slot of the first sample in
k..k+N (the slot of a sample at time x is floor(x / s) + 1; only differences matter, so the query uses
floor(x / s)), held(k) <=> b - a <= N + 1 (a = b = k when k is
occupied; otherwise a, b are the witnesses above): the same condition with 2 rollups instead of 2N + 1.
`dialect="metricsql"` (default) uses it, `"promql"` the portable form; the tests run both on the same data.

Replicas. Every lookup is `max by (<identity labels>)`, so copies of a series that differ only in
`instance`, `job`, `prometheus_replica`, `Hostname`, … collapse before anything is counted: a slot is
occupied when any copy has a sample in it.

Label schemes. dcgm-exporter emits `namespace`/`pod`/`container`/`UUID`, or with `--use-old-namespace`
`pod_namespace`/`pod_name`/`container_name`/`uuid`; both are selected (`pod!=""`, so absent and empty
pod labels, i.e. unattributed devices, never match) and the old names are relabelled to the new ones.

Clusters. Several host clusters in one TSDB are told apart by an external label (`cluster_label`, e.g.
`cluster`): every selector is narrowed to the clusters asked for and the label joins every identity,
`by (...)` and `on (...)` above, so replicas are merged, HAMi devices excluded and shares joined within a
cluster only (a UUID, pod or namespace is unique only there), and the hourly totals come back per cluster.

HAMi. A container's share of a GPU at slot k is the last allocation seen in the last N + 1 slots (the
occupied slot itself, or the sample before a bridged gap) divided by the device's memory limit, and/or
the core percentage / 100; `max` of the two by default. GPUs that HAMi manages (seen in
`hami_gpu_memory_limit_bytes` around the slot) are removed from the DCGM side with `unless on (UUID)`,
so a shared GPU is never also billed whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpufleet.core.metrics import DIALECTS

DCGM_IDENTITY = ("namespace", "pod", "container", "UUID", "GPU_I_ID", "GPU_I_PROFILE", "modelName")
DCGM_GROUP = ("namespace", "modelName", "GPU_I_PROFILE")
HAMI_IDENTITY = ("namespace", "pod", "container_index", "device_uuid")
HAMI_GROUP = ("namespace", "device_type")

HAMI_MEMORY = "hami_vgpu_memory_allocated_bytes"
HAMI_CORES = "hami_vgpu_core_allocated_ratio"
HAMI_DEVICE_MEMORY = "hami_gpu_memory_limit_bytes"

SHARE_RULES = ("max", "memory", "cores")
# DIALECTS: "metricsql" (VictoriaMetrics, default) | "promql" (any Prometheus-compatible TSDB), as configured
# by GPUFLEET_METRICS_DIALECT (gpufleet.core.metrics).


@dataclass(frozen=True)
class QuerySettings:
    scrape_interval: int  # seconds, divides 3600
    max_gap_scrapes: int  # N
    usage_metric: str  # a DCGM metric every attributed GPU and MIG instance reports
    share_rule: str = "max"
    namespace_prefix: str = "tenant-"
    dialect: str = "metricsql"
    # Several clusters in one TSDB: the name of the label that tells them apart (their vmagent's or
    # Prometheus' external label) and the values to measure. Every selector is narrowed to those values
    # and every aggregation keeps the label, so each cluster's usage comes back as its own series.
    cluster_label: str = ""
    cluster_values: tuple[str, ...] = ()
    # Only the DCGM series of these namespaces, pods and GPU UUIDs, and none of `skip_uuids` (matched
    # literally; empty = no restriction). The hourly method partitions the series this way: GPUs HAMi
    # manages and the few series-hours its rollups cannot decide go to the per-slot query.
    only_namespaces: tuple[str, ...] = ()
    only_pods: tuple[str, ...] = ()
    only_uuids: tuple[str, ...] = ()
    skip_uuids: tuple[str, ...] = ()
    # False when no DCGM series with --use-old-namespace label names has a sample anywhere near the
    # window (`dcgm_old_names_present`): the old-names branch of every rollup then returns nothing, and
    # leaving it out saves VictoriaMetrics a series search and an `or` per rollup (~10 % of a query).
    old_label_names: bool = True

    def __post_init__(self) -> None:
        if self.scrape_interval <= 0 or 3600 % self.scrape_interval:
            raise ValueError("scrape_interval must be a positive number of seconds that divides 3600")
        if self.max_gap_scrapes < 0:
            raise ValueError("max_gap_scrapes must be 0 or more")
        if self.dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}")
        if self.share_rule not in SHARE_RULES:
            raise ValueError(f"share_rule must be one of {', '.join(SHARE_RULES)}")
        if not self.usage_metric.replace("_", "").replace(":", "").isalnum():
            raise ValueError(f"not a metric name: {self.usage_metric!r}")
        if not self.namespace_prefix or not all(c.isalnum() or c == "-" for c in self.namespace_prefix):
            raise ValueError("namespace_prefix must be a DNS-label prefix such as 'tenant-'")
        if self.cluster_label and not LABEL_NAME.fullmatch(self.cluster_label):
            raise ValueError(f"not a label name: {self.cluster_label!r}")
        if bool(self.cluster_label) != bool(self.cluster_values):
            raise ValueError("cluster_label and cluster_values go together")
        if any(not value for value in self.cluster_values) or len(set(self.cluster_values)) != len(self.cluster_values):
            raise ValueError("cluster label values must be distinct and not blank")


LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# RE2 metacharacters: a label value is matched literally inside `=~"a|b"`.
_RE2_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def _string(text: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def cluster_matcher(label: str, values: tuple[str, ...]) -> str:
    """`, cluster="a"` or `, cluster=~"a|b"` (values matched literally), to append to a selector."""
    if not label:
        return ""
    if len(values) == 1:
        return f", {label}={_string(values[0])}"
    pattern = "|".join(_RE2_META.sub(r"\\\1", value) for value in values)
    return f", {label}=~{_string(pattern)}"


def _literal_matcher(label: str, values: tuple[str, ...], op: str = "=~") -> str:
    """`, label=~"a|b"` matching exactly these values (literally; `op="!~"`: none of them), or "" for no
    restriction."""
    if not values:
        return ""
    pattern = "|".join(_RE2_META.sub(r"\\\1", value) for value in sorted(set(values)))
    return f", {label}{op}{_string(pattern)}"


# Every window is shifted 1 ms back, so the slot ending at t is [t - s, t) (see the module docstring).
SHIFT_MS = 1


def _window(slots: int, offset_slots: int, s: int) -> str:
    """`slots` whole slots ending `offset_slots` slots before the slot k the expression is evaluated for."""
    return f"[{slots * s}s] offset {offset_slots * s * 1000 + SHIFT_MS}ms"


def _old_to_new(expr: str) -> str:
    """Relabel dcgm-exporter's --use-old-namespace label names to the current ones."""
    for new, old in (("namespace", "pod_namespace"), ("pod", "pod_name"),
                     ("container", "container_name"), ("UUID", "uuid")):
        expr = f'label_replace({expr}, "{new}", "$1", "{old}", "(.+)")'
    return expr


class Queries:
    def __init__(self, settings: QuerySettings) -> None:
        self.s = settings.scrape_interval
        self.n = settings.max_gap_scrapes
        self.settings = settings
        ns = f'{settings.namespace_prefix}.+'
        metric = settings.usage_metric
        scope = cluster_matcher(settings.cluster_label, settings.cluster_values)
        # With clusters, the cluster label joins every identity and grouping (a UUID or a namespace is
        # only unique within its cluster).
        extra = (settings.cluster_label,) if settings.cluster_label else ()
        self.dcgm_identity, self.dcgm_group = DCGM_IDENTITY + extra, DCGM_GROUP + extra
        self.hami_identity, self.hami_group = HAMI_IDENTITY + extra, HAMI_GROUP + extra
        self.device = _by(("device_uuid", *extra))
        self.uuid = _by(("UUID", *extra))
        new_only, old_only = (
            _literal_matcher(namespace, settings.only_namespaces) + _literal_matcher(pod, settings.only_pods)
            + _literal_matcher(uuid, settings.only_uuids) + _literal_matcher(uuid, settings.skip_uuids, "!~")
            for namespace, pod, uuid in (("namespace", "pod", "UUID"), ("pod_namespace", "pod_name", "uuid")))
        self.dcgm_new = f'{{__name__="{metric}", namespace=~"{ns}", pod!=""{scope}{new_only}}}'
        self.dcgm_old = f'{{__name__="{metric}", pod_namespace=~"{ns}", pod_name!=""{scope}{old_only}}}'
        self.hami_any = f'{{__name__=~"{HAMI_MEMORY}|{HAMI_CORES}", namespace=~"{ns}", pod!=""{scope}}}'
        self.hami_memory = f'{HAMI_MEMORY}{{namespace=~"{ns}", pod!=""{scope}}}'
        self.hami_cores = f'{HAMI_CORES}{{namespace=~"{ns}", pod!=""{scope}}}'
        self.hami_device_memory = f"{HAMI_DEVICE_MEMORY}{{{scope.removeprefix(', ')}}}" if scope else HAMI_DEVICE_MEMORY

    # -- building blocks ------------------------------------------------------------------------
    def _dcgm_rollup(self, func: str, slots: int, offset_slots: int, agg: str = "max") -> str:
        return f"{agg} by ({_by(self.dcgm_identity)}) ({self._dcgm_raw(func, _window(slots, offset_slots, self.s))})"

    def _hami_rollup(self, func: str, slots: int, offset_slots: int, agg: str = "max") -> str:
        return (f"{agg} by ({_by(self.hami_identity)}) "
                f"({func}({self.hami_any}{_window(slots, offset_slots, self.s)}))")

    def _held(self, rollup) -> str:
        """held(k) as derived in the module docstring, for one family of series."""
        occupied = f"({rollup('present_over_time', 1, 0)})"
        if self.n == 0:
            return occupied
        if self.settings.dialect == "metricsql":
            # The same condition with 2 rollups instead of 2N + 1: the slot of the last sample in
            # k-N..k and the slot of the first sample in k..k+N (a sample at time x is in slot
            # floor(x / s) + 1) are at most N + 1 apart. Both are k when k is occupied. tlast/tfirst_over_time
            # are MetricsQL (VictoriaMetrics), not PromQL.
            last = f"floor(({rollup('tlast_over_time', self.n + 1, 0)}) / {self.s})"
            first = f"floor(({rollup('tfirst_over_time', self.n + 1, -self.n, 'min')}) / {self.s})"
            return f"((({first} - {last}) <= {self.n + 1}) * 0 + 1)"
        terms = [occupied]
        for i in range(1, self.n + 1):
            ahead = self.n + 1 - i
            terms.append(f"(({rollup('present_over_time', i, 1)}) and "
                         f"({rollup('present_over_time', ahead, -ahead)}))")
        return " or ".join(terms)

    def hami_devices(self) -> str:
        """GPUs HAMi manages around slot k (k-N-1 .. k+N+1), keyed by the DCGM label name UUID."""
        span = 2 * self.n + 3
        inner = (f"max by ({self.device}) (present_over_time({self.hami_device_memory}"
                 f"{_window(span, -(self.n + 1), self.s)}))")
        return f'label_replace({inner}, "UUID", "$1", "device_uuid", "(.+)")'

    def _hami_share(self) -> str:
        lookback = _window(self.n + 1, 0, self.s)
        identity = _by(self.hami_identity)
        memory = (f"(max by ({identity}) (last_over_time({self.hami_memory}{lookback}))"
                  f" / on ({self.device}) group_left"
                  f" max by ({self.device}) (last_over_time({self.hami_device_memory}{lookback})))")
        cores = f"(max by ({identity}) (last_over_time({self.hami_cores}{lookback})) / 100)"
        if self.settings.share_rule == "memory":
            return memory
        if self.settings.share_rule == "cores":
            return cores
        return (f"max by ({identity}) ("
                f'label_replace({memory}, "share_part", "memory", "", "")'
                f' or label_replace({cores}, "share_part", "cores", "", ""))')

    # -- per-slot expressions -------------------------------------------------------------------
    def dcgm_held_slot(self) -> str:
        """1 per (identity) for every held slot of an attributed whole GPU or MIG instance."""
        return f"(({self._held(self._dcgm_rollup)}) unless on ({self.uuid}) ({self.hami_devices()}))"

    def hami_share_slot(self) -> str:
        """The container's share (0..1) for every held slot of a HAMi allocation."""
        return (f"(({self._hami_share()}) and on ({_by(self.hami_identity)}) "
                f"({self._held(self._hami_rollup)}))")

    # -- hourly totals (range query, step 1h, evaluated at hour ends) -----------------------------
    def dcgm_hourly_slots(self) -> str:
        """Held slots per (tenant namespace, GPU model, MIG profile[, cluster]) in the hour ending at t."""
        return (f"sum by ({_by(self.dcgm_group)}) "
                f"(sum_over_time(({self.dcgm_held_slot()})[3600s:{self.s}s]))")

    def hami_hourly_share_slots(self) -> str:
        """Σ share over held slots per (tenant namespace, HAMi device type[, cluster]) in the hour ending at t."""
        device_type = (f"group by ({self.device}, device_type) "
                       f"(last_over_time({self.hami_device_memory}[3600s] offset {SHIFT_MS}ms))")
        return (f"sum by ({_by(self.hami_group)}) ("
                f"sum_over_time(({self.hami_share_slot()})[3600s:{self.s}s])"
                f" * on ({self.device}) group_left (device_type) {device_type})")

    # -- the hourly method (MetricsQL): exact held slots per series-hour from a few rollups ----------
    def hourly_method_applies(self) -> bool:
        """The hourly method needs MetricsQL (t*_over_time, duration_over_time, `bool`) and N < slots per
        hour (a series without a sample in W then has no held slot in the hour; see `dcgm_hourly_encoded`)."""
        return self.settings.dialect == "metricsql" and self.n < 3600 // self.s

    def _dcgm_raw(self, func: str, window: str, args: str = "") -> str:
        """`func` per raw series (every replica on its own), old label names relabelled."""
        new = f"{func}({self.dcgm_new}{window}{args})"
        if not self.settings.old_label_names:
            return new
        old = _old_to_new(f"{func}({self.dcgm_old}{window}{args})")
        return f"({new} or {old})"

    def dcgm_group_hourly(self) -> str:
        """Held slots of the hour ending at t per group, encoded like `dcgm_hourly_encoded` (value = Σ held
        + HOURLY_FLAG x undecided), but decided only where every identity of the group-hour has ONE raw
        series in W and that series is steady; anything else (replicas, a long gap) is flagged and measured
        again by `dcgm_hourly_encoded(aggregate=False)`, which handles replicas.

        Why a second formulation: VictoriaMetrics spends about as much CPU on each binary operation over
        the raw series (~1,800 a day in the benchmark, each a hash join and a copy) as on each rollup pass
        over their samples, and the replica logic of `dcgm_hourly_encoded` needs a dozen of both. Here:

        * a = clamp(floor(tfirst / s), T/s - m, T/s), b = clamp(floor(tlast / s), T/s - m - 1, T/s - 1):
          absolute slot indices clamped to the hour ending at T (clamp takes the per-step scalar bounds,
          a transform, not a join); only differences matter, b - a + 1 is the raw series' slot span in
          the hour exactly as `dcgm_hourly_encoded` computes it.
        * steady (no interval longer than (N + 1)·s between its samples in W) iff duration_over_time(W,
          |W|) - duration_over_time(W, (N + 1)·s) = 0; otherwise the difference is the sum of the long
          intervals, more than (N + 1)·s >= 1 s, so clamp_max(round(difference), 1) is 0 or 1.
        * per group: Σ b + Σ_identities (Σ (F + 1 - a) - F) + F·Σ unsteady = Σ (b - a + 1) + F·(Σ
          (replicas - 1) + Σ unsteady). With one steady series per identity its b - a + 1 is the
          identity's held slots (the argument of `dcgm_hourly_encoded` with one replica); the flag part is
          0 exactly then. Each rollup appears once; all but three binary operations act on group sums.
          Values are integers below 2^53 (slot indices ~6·10^7), so float64 sums are exact."""
        s, n, m = self.s, self.n, 3600 // self.s
        ident, group, flag = _by(self.dcgm_identity), _by(self.dcgm_group), HOURLY_FLAG
        window = _window(m + 2 * n, -n, s)
        end = f"(time() / {s})"  # the slot index at the hour's end
        first = f"clamp(floor({self._dcgm_raw('tfirst_over_time', window)} / {s}), {end} - {m}, {end})"
        last = f"clamp(floor({self._dcgm_raw('tlast_over_time', window)} / {s}), {end} - {m + 1}, {end} - 1)"
        # `or vector(0)` on each left side: see `dcgm_hourly_encoded` (stops the label push-down)
        long_gaps = (f"(({self._dcgm_raw('duration_over_time', window, f', {(m + 2 * n) * s}')} or vector(0))"
                     f" - {self._dcgm_raw('duration_over_time', window, f', {(n + 1) * s}')})")
        unsteady = f"sum by ({group}) (clamp_max(round({long_gaps}), 1))"
        lasts = f"sum by ({group}) ({last})"
        firsts = f"sum by ({group}) (sum by ({ident}) ({flag + 1} - {first}) - {flag})"
        return f"(((({lasts} or vector(0)) + {firsts}) or vector(0)) + {flag} * {unsteady})"

    def dcgm_old_names_present(self, slots: int) -> str:
        """One series (marked `OLD_NAMES_MARKER`) when any DCGM series with the old label names has a
        sample in the `slots` slots before t or N + 1 slots either side (one point): every DCGM rollup of a
        chunk, per-slot ones included, looks no further."""
        window = _window(slots + 2 * self.n + 2, -(self.n + 1), self.s)
        return f'label_set(count(present_over_time({self.dcgm_old}{window})), "{OLD_NAMES_MARKER}", "1")'

    def dcgm_hourly_encoded(self, aggregate: bool = True) -> str:
        """Held slots of the hour ending at t per group (`aggregate`) or per identity, encoded with a flag
        for the identities the rollups cannot decide: value = Σ held + HOURLY_FLAG x Σ D, D = 0 for a
        decided identity and >= 1 for one that needs the per-slot query.

        Window W: the hour plus N slots either side; every witness of a bridged slot of the hour lies in
        W. Per raw series (one replica): a, b = its first and last occupied slot in W, clamped to the
        hour (relative slots 0 .. m-1; a in 0..m, b in -1..m-1), and whether it is *steady* in W: no
        interval between its consecutive samples longer than (N + 1)·s (duration_over_time with that
        max interval equals the one with an unbounded one; a longer interval costs more than s/2, float
        rounding far less). A steady series' slots between its first and last sample are all held (two
        consecutive samples at most (N + 1)·s apart are at most N + 1 slots apart). Per identity: A =
        min a, B = max b, R = max over its replicas of b - a for steady ones (b - a - (m + 2) otherwise).
        Decided (D = (B - A) - R = 0): one steady replica spans [A, B], so every slot of [A, B] is held
        and no other slot of the hour is (a held slot before A would need an occupied slot of W before
        it, and A is the first); held = B - A + 1 (0 when the identity's samples in W are all outside
        the hour). The value (B - A + 1) + FLAG·D is linear in A, B and R, so each rollup is evaluated
        once (MetricsQL has no common subexpressions: every occurrence of a rollup reads every sample).
        An identity with no sample in W has no held slot in the hour (a bridged run is at most N < m
        slots) and no value."""
        s, n, m = self.s, self.n, 3600 // self.s
        ident = _by(self.dcgm_identity)
        window = _window(m + 2 * n, -n, s)
        first = f"(floor({self._dcgm_raw('tfirst_over_time', window)} / {s}) - (time() / {s} - {m}))"
        last = f"(floor({self._dcgm_raw('tlast_over_time', window)} / {s}) - (time() / {s} - {m}))"
        a = f"clamp_max(clamp_min({first}, 0), {m})"
        b = f"clamp_min(clamp_max({last}, {m - 1}), -1)"
        everything = self._dcgm_raw("duration_over_time", window, f", {(m + 2 * n) * s}")
        bridged = self._dcgm_raw("duration_over_time", window, f", {(n + 1) * s}")
        # VictoriaMetrics evaluates the left side of a binary operation first and pushes the label values
        # all its series share down into the right side's selector, as regexes (of every UUID, host,
        # namespace, ...): the index search for those cost more CPU than the rollups. A label-less
        # `vector(0)` on the left shares no label with them, so nothing is pushed down; it matches no
        # series on the right, so one-to-one matching drops it and the result is unchanged.
        def minus(left: str, right: str) -> str:
            return f"(({left} or vector(0)) - {right})"

        unsteady = f"({minus(everything, bridged)} > bool {s / 2})"
        flag = HOURLY_FLAG
        span = minus(f"max by ({ident}) ({b})", f"min by ({ident}) ({a})")
        replicas = f"max by ({ident}) ({minus(minus(b, a), f'{m + 2} * {unsteady}')})"
        value = f"({minus(f'{span} * {1 + flag}', f'{replicas} * {flag}')} + 1)"
        return f"sum by ({_by(self.dcgm_group)}) ({value})" if aggregate else value

    def hami_device_uuids(self, slots: int) -> str:
        """The GPUs HAMi manages in the `slots` slots before t and N + 1 slots either side (one point)."""
        return (f"max by ({self.device}) (present_over_time({self.hami_device_memory}"
                f"{_window(slots + 2 * self.n + 2, -(self.n + 1), self.s)}))")

    def dcgm_identity_hourly_slots(self) -> str:
        """The per-slot method's held slots per identity (not per group) in the hour ending at t."""
        return f"sum_over_time(({self.dcgm_held_slot()})[3600s:{self.s}s])"


# Σ held slots of one group-hour stays below this (2^24: 139,810 series at a 30 s scrape), so the sum of
# `dcgm_hourly_encoded` splits exactly into (held, undecided) in float64 (both parts are integers).
HOURLY_FLAG = 2**24
# The label of the one series `dcgm_old_names_present` returns (no DCGM or HAMi series carries it).
OLD_NAMES_MARKER = "gpufleet_old_label_names"
