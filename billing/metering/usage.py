"""Measured GPU usage per tenant x flavor x hour, computed inside the TSDB.

Contract (what `billing.collect` relies on)
-------------------------------------------
`measure(client, flavors, start, end, *, scrape_interval=30, max_gap_scrapes=3, share_rule="max",
usage_metric="DCGM_FI_DEV_FB_USED", chunk_hours=24, dialect="metricsql") -> list[UsageSample]`

* `client` is an `infra.metrics.MetricsClient` (anything with `.range(query, start, end, step_seconds)`).
* `flavors` are plain `FlavorSpec`s: name, mode (`whole` | `mig` | `hami`), `model_name` (dcgm-exporter's
  `modelName`, e.g. "NVIDIA A100 80GB PCIe"), `mig_profile` (MIG only, e.g. "3g.40gb"), `weight`
  (GPU-equivalents of one unit). At most one flavor per (mode, model, profile); HAMi: one per model.
* `dialect`: "metricsql" (VictoriaMetrics, default: fewer rollups) or "promql" (any Prometheus-API TSDB);
  both compute the same numbers.
* `start`, `end`: UTC-aware datetimes on whole hours, `start < end`. The window is [start, end).
* Returns one `UsageSample` (fields, in order: hour_start, tenant_slug, flavor, unit_seconds,
  gpu_equivalent_seconds, cluster; use the names) per (tenant, flavor, hour, cluster) with non-zero use,
  sorted by (tenant_slug, flavor, cluster, hour_start). Hours without use
  are absent (the collector replaces the whole window, so absence means zero).
    - whole GPU: unit_seconds = Σ held seconds of attributed GPUs (integer);
      gpu_equivalent_seconds = unit_seconds x weight.
    - MIG: the same per MIG instance of the flavor's profile on that GPU model.
    - HAMi: unit_seconds = Σ held seconds x measured share (0..1 of one GPU, by `share_rule`);
      gpu_equivalent_seconds = unit_seconds — the measured share *is* the GPU fraction and replaces the
      flavor's nominal weight (catalog weight of a HAMi flavor = its nominal share), so it is not applied
      twice. Quantized to 0.001 s (shares are ratios computed in float64 by the TSDB).
* Pure and deterministic: the same TSDB content gives the same list (collecting twice replaces rows).
  Numbers for [start, end) depend on samples up to `settles_at(end)`: collect a window once it is older.
* Usage the query sees but no flavor matches (unknown model or profile) is reported by
  `measure_report(...)` as `unmatched`, never silently dropped; `measure` returns the matched part.
* Bad arguments raise `MeteringInputError` (a `ValueError` with a `field`), before any query runs.
  The client's `infra.errors.TransientError` / `PermanentError` pass through unchanged (retry or report).
* `chunk_hours`: hours per range query (default 24, shortened to at most 50,000 slots per query); the
  numbers do not depend on it.
* `hourly_chunk_hours`: hours per range query of the hourly method's DCGM side (default: `chunk_hours`,
  shortened the same way); longer chunks cost VictoriaMetrics less per day. The numbers do not depend on it.
* `clusters` (several host clusters): the `ClusterSource`s this metrics source serves. None: no cluster
  dimension (`UsageSample.cluster` is ""). One without a label: every series of the source is that
  cluster's. Otherwise every cluster needs a distinct value of the `cluster_label` label (default
  `cluster`, the external label its vmagent/Prometheus adds); the queries select only those values and
  keep the label in every aggregation, so one query per kind and chunk measures all of them and each
  sample (and unmatched entry) names its cluster. Same numbers per cluster as measuring it alone.

* `method`: "hourly" (default; MetricsQL only, whole GPUs and MIG) measures most series-hours from a
  few hourly rollups and the rest per slot; "per-slot" measures every slot (the reference; always used
  with `dialect="promql"` and for HAMi). Both give the same numbers.

Method: see `billing.metering.promql` and docs/billing.md § "Measuring method" ("The hourly method").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from sys import intern
from typing import NamedTuple, Protocol

from billing.metering.promql import DIALECTS, HOURLY_FLAG, OLD_NAMES_MARKER, SHARE_RULES, Queries, QuerySettings
from gpufleet.core import sharing

# The modes measured from each kind of series (the registry's metering identities): dcgm-exporter's per-GPU
# series, its per-MIG-instance series, HAMi's per-share series. One mode per identity, or usage could not
# be told apart; a mode with a new identity brings its own query here.
WHOLE, MIG, HAMI = (sharing.by_metering(identity).name
                    for identity in (sharing.DCGM_GPU, sharing.DCGM_MIG_INSTANCE, sharing.HAMI_SHARE))
DEFAULT_USAGE_METRIC = "DCGM_FI_DEV_FB_USED"
DEFAULT_SCRAPE_INTERVAL = 30
DEFAULT_MAX_GAP_SCRAPES = 3
DEFAULT_CLUSTER_LABEL = "cluster"
TENANT_PREFIX = "tenant-"
HOUR = timedelta(hours=1)
SECONDS_QUANTUM = Decimal("0.001")
# "hourly": the DCGM side from hourly rollups, per-slot only for the series-hours they leave undecided
# (MetricsQL; the same numbers). "per-slot": every slot in a subquery, the reference (any dialect).
HOURLY, PER_SLOT = "hourly", "per-slot"
METHODS = (HOURLY, PER_SLOT)
# Slots one range query may evaluate per series: VictoriaMetrics refuses subqueries over
# -search.maxPointsSubqueryPerTimeseries (100,000 by default); chunks are shortened to stay well below.
SUBQUERY_POINT_BUDGET = 50_000


class RangeQuerier(Protocol):
    def range(self, query: str, start: datetime, end: datetime, step_seconds: int) -> list: ...


class MeteringInputError(ValueError):
    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field = field_name
        self.reason = reason


@dataclass(frozen=True)
class FlavorSpec:
    name: str
    mode: str
    model_name: str
    weight: Decimal
    mig_profile: str = ""


@dataclass(frozen=True)
class ClusterSource:
    """One cluster measured from a metrics source: its gpufleet name and the value of the cluster label
    its series carry in that source ("" = every series in the source is this cluster's)."""

    name: str
    label: str = ""


class UsageSample(NamedTuple):
    # A tuple (immutable, ordered, compared in C): a month of a large fleet is 3-5 x 10^5 of these.
    hour_start: datetime
    tenant_slug: str
    flavor: str
    unit_seconds: Decimal
    gpu_equivalent_seconds: Decimal
    cluster: str = ""  # the ClusterSource name; "" when measured without clusters


@dataclass(frozen=True, order=True)
class Unmatched:
    hour_start: datetime
    tenant_slug: str
    mode: str  # whole | mig | hami
    model_name: str
    mig_profile: str
    unit_seconds: Decimal
    cluster: str = ""


@dataclass
class Report:
    samples: list[UsageSample]
    unmatched: list[Unmatched] = field(default_factory=list)
    queries: int = 0
    # of them, DCGM queries of the per-slot method (all of DCGM's with method="per-slot"; with the hourly
    # method only the HAMi-managed GPUs and the series-hours the rollups leave undecided)
    dcgm_per_slot_queries: int = 0


def settles_at(end: datetime, *, scrape_interval: int = DEFAULT_SCRAPE_INTERVAL,
               max_gap_scrapes: int = DEFAULT_MAX_GAP_SCRAPES) -> datetime:
    """After this moment no new scrape can change the numbers for a window ending at `end`
    (gap bridging looks up to N slots ahead; the HAMi device check N + 1)."""
    return end + timedelta(seconds=(max_gap_scrapes + 2) * scrape_interval)


def _model_key(name: str) -> str:
    # dcgm-exporter's --replace-blanks-in-model-name turns blanks into dashes; compare both forms alike.
    return name.strip().replace(" ", "-").casefold()


def _hami_model_keys(device_type: str) -> tuple[str, ...]:
    # HAMi names NVIDIA devices "NVIDIA-<NVML name>", e.g. "NVIDIA-NVIDIA A100-SXM4-80GB".
    key = _model_key(device_type)
    return (key, key.removeprefix("nvidia-")) if key.startswith("nvidia-") else (key,)


class FlavorIndex:
    def __init__(self, flavors: Iterable[FlavorSpec]) -> None:
        self.by_key: dict[tuple[str, str, str], FlavorSpec] = {}
        names: set[str] = set()
        for flavor in flavors:
            if not flavor.name:
                raise MeteringInputError("flavors", "a flavor has no name")
            if flavor.name in names:
                raise MeteringInputError("flavors", f"flavor {flavor.name!r} appears twice")
            names.add(flavor.name)
            if flavor.mode not in (WHOLE, MIG, HAMI):
                raise MeteringInputError("flavors", f"flavor {flavor.name!r}: unknown mode {flavor.mode!r}")
            if not flavor.model_name:
                raise MeteringInputError("flavors", f"flavor {flavor.name!r} has no GPU model name")
            if flavor.mode == MIG and not flavor.mig_profile:
                raise MeteringInputError("flavors", f"MIG flavor {flavor.name!r} has no MIG profile")
            if not isinstance(flavor.weight, Decimal) or flavor.weight <= 0:
                raise MeteringInputError("flavors", f"flavor {flavor.name!r}: weight must be a positive Decimal")
            key = (flavor.mode, _model_key(flavor.model_name), flavor.mig_profile if flavor.mode == MIG else "")
            if key in self.by_key:
                raise MeteringInputError(
                    "flavors", f"flavors {self.by_key[key].name!r} and {flavor.name!r} both measure {key[1]!r}"
                    f"{' ' + key[2] if key[2] else ''} ({flavor.mode}); usage could not be told apart")
            self.by_key[key] = flavor

    def dcgm(self, model_name: str, mig_profile: str) -> FlavorSpec | None:
        mode = MIG if mig_profile else WHOLE
        return self.by_key.get((mode, _model_key(model_name), mig_profile))

    def hami(self, device_type: str) -> FlavorSpec | None:
        for key in _hami_model_keys(device_type):
            if (found := self.by_key.get((HAMI, key, ""))) is not None:
                return found
        return None


def _cluster_scope(clusters: Sequence[ClusterSource], label_name: str) -> tuple[str, dict[str, str]]:
    """(label name to group by or "", {label value: cluster name}) for the clusters of one source."""
    names = [c.name for c in clusters]
    if len(set(names)) != len(names) or any(not isinstance(n, str) or not n for n in names):
        raise MeteringInputError("clusters", "cluster names must be distinct and not blank")
    labels = [c.label for c in clusters]
    if len(clusters) <= 1 and not any(labels):
        return "", {}
    if not all(labels):
        raise MeteringInputError("clusters", "clusters that share a metrics source need a cluster label each "
                                 f"(blank for {', '.join(c.name for c in clusters if not c.label)}): without "
                                 "one their series cannot be told apart")
    if len(set(labels)) != len(labels):
        raise MeteringInputError("clusters", "two clusters of one metrics source have the same cluster label")
    return label_name, {c.label: c.name for c in clusters}


def _check_window(start: datetime, end: datetime) -> None:
    for name, moment in (("start", start), ("end", end)):
        if not isinstance(moment, datetime) or moment.tzinfo is None or moment.utcoffset() != timedelta(0):
            raise MeteringInputError(name, "must be a UTC datetime")
        if moment.minute or moment.second or moment.microsecond:
            raise MeteringInputError(name, "must be on a whole hour")
    if start >= end:
        raise MeteringInputError("end", "must be after start")


def _chunks(start: datetime, end: datetime, hours: int) -> Iterable[tuple[datetime, datetime]]:
    cursor = start
    while cursor < end:
        upper = min(cursor + timedelta(hours=hours), end)
        yield cursor, upper
        cursor = upper


def _tenant(namespace: str, prefix: str) -> str | None:
    slug = namespace.removeprefix(prefix)
    return slug if namespace.startswith(prefix) and slug else None


def _hour_start(timestamp: Decimal) -> datetime:
    return datetime.fromtimestamp(int(timestamp), tz=UTC) - HOUR


def _weight_ratio(weight: Decimal) -> tuple[int, int]:
    """(numerator, denominator) of a flavor weight, exactly: weight = numerator / denominator, the
    denominator a power of ten (a Decimal's exponent), so milliseconds x weight stay integers."""
    exponent = weight.as_tuple().exponent
    assert isinstance(exponent, int)  # FlavorIndex admits only finite positive weights
    if exponent >= 0:
        return int(weight), 1
    return int(weight.scaleb(-exponent)), 10 ** -exponent


def _round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded to an integer, ties to even (Decimal.quantize's default rounding)."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient & 1):
        quotient += 1
    return quotient


def _seconds(milliseconds: int) -> Decimal:
    """Integer milliseconds as the Decimal seconds the contract promises (exponent -3, e.g. 3600.000)."""
    return Decimal(milliseconds).scaleb(-3)


# Identities per per-slot query of the hourly method's remainder (keeps the label regexes short).
REMAINDER_BATCH = 200


def _hourly_dcgm(client: RangeQuerier, queries: Queries, first_end: datetime, last_end: datetime,
                 add) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """The DCGM side of one chunk by the hourly method; returns the number of queries run and how many
    of them were per-slot ones. The series are partitioned, so every series-hour is counted exactly once:

    1. GPUs HAMi manages near the chunk (one cheap query, which also says whether any series with the
       old label names is there) are left to the per-slot query, restricted to their UUIDs (the HAMi
       exclusion is per slot);
    2. everything else: the group totals (`Queries.dcgm_group_hourly`, one query), decided where every
       identity is one steady series; a group-hour whose sum carries the undecided flag is measured again
       per identity by the replica-aware rollups (`dcgm_hourly_encoded`, restricted to those namespaces
       and hours): decided identities count as they are, undecided ones go to the per-slot query
       restricted to their pods and UUIDs (every replica and label scheme of an identity shares them),
       and only those (identity, hour) pairs are taken from its answer."""
    settings, group = queries.settings, queries.dcgm_group
    hours = int((last_end - first_end) / HOUR) + 1
    runs, per_slot = 1, 0
    slots = hours * 3600 // settings.scrape_interval
    probe = client.range(f"{queries.hami_device_uuids(slots)} or {queries.dcgm_old_names_present(slots)}",
                         last_end, last_end, 3600)
    managed = sorted({series.labels.get("device_uuid", "") for series in probe} - {""})
    settings = replace(settings, old_label_names=any(OLD_NAMES_MARKER in series.labels for series in probe))
    if managed:
        runs += 1
        per_slot += 1
        for series in client.range(Queries(replace(settings, only_uuids=tuple(managed))).dcgm_hourly_slots(),
                                   first_end, last_end, 3600):
            add(WHOLE, series.labels, series.samples)
    rest = replace(settings, skip_uuids=tuple(managed))
    flagged: set[tuple[tuple[str, ...], Decimal]] = set()
    runs += 1
    for series in client.range(Queries(rest).dcgm_group_hourly(), first_end, last_end, 3600):
        decided = []
        for sample in series.samples:
            undecided, held = divmod(int(sample.value), HOURLY_FLAG)
            if undecided:
                flagged.add((tuple(series.labels.get(name, "") for name in group), sample.timestamp))
            else:
                decided.append((sample.timestamp, held))
        add(WHOLE, series.labels, decided)
    if not flagged:
        return runs, per_slot
    # Per identity, for the flagged group-hours only.
    stamps = sorted({stamp for _, stamp in flagged})
    lower, upper = (datetime.fromtimestamp(int(stamps[i]), tz=UTC) for i in (0, -1))
    identity = queries.dcgm_identity
    namespace = group.index("namespace")
    narrowed = Queries(replace(rest, only_namespaces=tuple({key[namespace] for key, _ in flagged})))
    undecided_pairs: dict[tuple[str, ...], set[Decimal]] = defaultdict(set)
    runs += 1
    for series in client.range(narrowed.dcgm_hourly_encoded(aggregate=False), lower, upper, 3600):
        key = tuple(series.labels.get(name, "") for name in group)
        decided = []
        for sample in series.samples:
            if (key, sample.timestamp) not in flagged:
                continue
            undecided, held = divmod(int(sample.value), HOURLY_FLAG)
            if undecided:
                undecided_pairs[tuple(series.labels.get(name, "") for name in identity)].add(sample.timestamp)
            else:
                decided.append((sample.timestamp, held))
        add(WHOLE, series.labels, decided)
    keys = sorted(undecided_pairs)
    pod, uuid = identity.index("pod"), identity.index("UUID")
    for begin in range(0, len(keys), REMAINDER_BATCH):
        batch = keys[begin:begin + REMAINDER_BATCH]
        stamps = sorted(stamp for key in batch for stamp in undecided_pairs[key])
        restricted = Queries(replace(settings, only_pods=tuple({key[pod] for key in batch}),
                                     only_uuids=tuple({key[uuid] for key in batch})))
        lower, upper = (datetime.fromtimestamp(int(stamps[i]), tz=UTC) for i in (0, -1))
        runs += 1
        per_slot += 1
        for series in client.range(restricted.dcgm_identity_hourly_slots(), lower, upper, 3600):
            wanted = undecided_pairs.get(tuple(series.labels.get(name, "") for name in identity))
            if wanted:
                add(WHOLE, series.labels, [sample for sample in series.samples if sample.timestamp in wanted])
    return runs, per_slot


def measure_report(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime, *,
                   scrape_interval: int = DEFAULT_SCRAPE_INTERVAL,
                   max_gap_scrapes: int = DEFAULT_MAX_GAP_SCRAPES, share_rule: str = "max",
                   usage_metric: str = DEFAULT_USAGE_METRIC, chunk_hours: int = 24,
                   dialect: str = "metricsql", clusters: Sequence[ClusterSource] = (),
                   cluster_label: str = DEFAULT_CLUSTER_LABEL, method: str = HOURLY,
                   hourly_chunk_hours: int | None = None) -> Report:
    _check_window(start, end)
    if method not in METHODS:
        raise MeteringInputError("method", f"must be one of {', '.join(METHODS)}")
    label_name, by_label = _cluster_scope(clusters, cluster_label)
    # One unlabelled cluster owns every series of its source; with labels each series names its own.
    only = clusters[0].name if clusters and not label_name else ""
    if chunk_hours < 1:
        raise MeteringInputError("chunk_hours", "must be at least 1")
    if hourly_chunk_hours is not None and hourly_chunk_hours < 1:
        raise MeteringInputError("hourly_chunk_hours", "must be at least 1")
    if share_rule not in SHARE_RULES:
        raise MeteringInputError("share_rule", f"must be one of {', '.join(SHARE_RULES)}")
    if dialect not in DIALECTS:
        raise MeteringInputError("dialect", f"must be one of {', '.join(DIALECTS)}")
    try:
        queries = Queries(QuerySettings(scrape_interval, max_gap_scrapes, usage_metric, share_rule,
                                        TENANT_PREFIX, dialect, label_name, tuple(by_label)))
    except ValueError as exc:
        raise MeteringInputError("settings", str(exc)) from exc
    index = FlavorIndex(flavors)
    s = Decimal(scrape_interval)
    budget = SUBQUERY_POINT_BUDGET * scrape_interval // 3600
    # The hourly method's chunk may be longer than the per-slot one: its rollups are evaluated once an
    # hour, and VictoriaMetrics reads each stored block of a series once per query, so several days per
    # query cost less per day; its per-slot remainder stays within the same point budget.
    hourly_chunk_hours = max(1, min(hourly_chunk_hours or chunk_hours, budget))
    chunk_hours = max(1, min(chunk_hours, budget))

    # Exact integers until the samples are built: unit milliseconds, and milliseconds x the weight's
    # numerator (the weight's denominator is a power of ten, applied once per row when rounding), so a
    # month's ~10^6 answer points cost an int multiply-add each instead of Decimal arithmetic.
    # Per (tenant, flavor, cluster), then per hour: [unit ms, Σ ms x weight numerator]. An answer series is
    # one tenant, flavor and cluster, so its key is built once per series, not per point, and the samples
    # come out per key with the hours in order without sorting every row.
    totals: dict[tuple[str, str, str], dict[datetime, list[int]]] = {}
    unmatched: dict[tuple[datetime, str, str, str, str, str], int] = defaultdict(int)
    count = per_slot = 0
    # hour end (an answer's timestamp) -> the hour's start, or None outside [start, end): a few dozen
    # distinct stamps per query
    hours: dict[Decimal, datetime | None] = {}
    slot_ms = scrape_interval * 1000
    # HAMi: the measured share is the GPU fraction (weight not applied), i.e. a ratio of 1.
    ratios = {flavor.name: (1, 1) if flavor.mode == HAMI else _weight_ratio(flavor.weight)
              for flavor in index.by_key.values()}

    def add(kind: str, labels: dict[str, str], samples: Iterable[tuple[Decimal, Decimal | int]]) -> None:
        """Add one answer series (held slots, or Σ share x slots, per hour end) to the totals. Values are
        the client's Decimals or, from the hourly method's decoding, exact ints (held slots)."""
        tenant = _tenant(labels.get("namespace", ""), TENANT_PREFIX)
        if tenant is None:
            return
        tenant = intern(tenant)  # one object per tenant: the sort below compares equal ones by identity
        cluster = by_label.get(labels.get(label_name, "")) if label_name else only
        if cluster is None:  # the selector admits only the clusters asked for
            return
        if kind == WHOLE:
            model, profile = labels.get("modelName", ""), labels.get("GPU_I_PROFILE", "")
            flavor = index.dcgm(model, profile)
            mode = MIG if profile else WHOLE
        else:
            model, profile = labels.get("device_type", ""), ""
            flavor = index.hami(model)
            mode = HAMI
        if flavor is None:
            cells = None
            numerator = 0
        else:
            key = (tenant, flavor.name, cluster)
            cells = totals.get(key)
            if cells is None:
                cells = totals[key] = {}
            numerator = ratios[flavor.name][0]
        for stamp, value in samples:
            hour = hours.get(stamp, False)
            if hour is False:
                hour = _hour_start(stamp)
                hour = hours[stamp] = hour if start <= hour < end else None
            if hour is None:
                continue
            if value.__class__ is int:
                if value == 0:
                    continue
                milliseconds = value * slot_ms
            else:
                if not value.is_finite() or value == 0:  # type: ignore[union-attr]
                    continue
                # a share x slots: seconds quantized to 0.001 as before, then exactly in ms
                milliseconds = int((value * s).quantize(SECONDS_QUANTUM).scaleb(3))
            if cells is None:
                unmatched[(hour, tenant, mode, model, profile, cluster)] += milliseconds
                continue
            cell = cells.get(hour)
            if cell is None:
                cells[hour] = [milliseconds, milliseconds * numerator]
            else:
                cell[0] += milliseconds
                cell[1] += milliseconds * numerator

    hourly = method == HOURLY and queries.hourly_method_applies()
    # Range queries evaluated at each hour END in (lower, upper]; each point covers the hour before it.
    if hourly:
        for lower, upper in _chunks(start, end, hourly_chunk_hours):
            runs, slotted = _hourly_dcgm(client, queries, lower + HOUR, upper, add)
            count, per_slot = count + runs, per_slot + slotted
    for lower, upper in _chunks(start, end, chunk_hours):
        first_end, last_end = lower + HOUR, upper
        if not hourly:
            count, per_slot = count + 1, per_slot + 1
            for series in client.range(queries.dcgm_hourly_slots(), first_end, last_end, 3600):
                add(WHOLE, series.labels, series.samples)
        count += 1
        for series in client.range(queries.hami_hourly_share_slots(), first_end, last_end, 3600):
            add(HAMI, series.labels, series.samples)
    # In (tenant_slug, flavor, cluster, hour_start) order: the few thousand keys are sorted, and each key's
    # hours arrive in time order from the answers (sorting an already ordered list is one pass).
    # gpu-equivalent ms = Σ ms x numerator / denominator, rounded half-even once per row: what quantizing
    # the exact Decimal sum of seconds x weight to 0.001 gave.
    # A month is ~3-5 x 10^5 samples but only a few thousand distinct values (held slots x the scrape
    # interval), and Decimals are immutable: one Decimal per distinct value is shared. `tuple.__new__`
    # is what a NamedTuple's generated __new__ calls, without its Python frame per sample.
    as_seconds: dict[int, Decimal] = {}
    # per flavor: Σ ms x numerator -> gpu-equivalent seconds, rounded once per distinct sum
    weighted_seconds: dict[str, dict[int, Decimal]] = {name: {} for name in ratios}
    make = tuple.__new__
    samples: list[UsageSample] = []
    for key in sorted(totals):
        tenant, name, cluster = key
        cells, known, denominator = totals[key], weighted_seconds[name], ratios[name][1]
        for hour in sorted(cells):
            unit, weighted = cells[hour]
            if unit == 0:
                continue
            gpu = known.get(weighted)
            if gpu is None:
                gpu = known[weighted] = _seconds(_round_half_even(weighted, denominator))
            samples.append(make(UsageSample, (
                hour, tenant, name, as_seconds.get(unit) or as_seconds.setdefault(unit, _seconds(unit)), gpu,
                cluster)))
    missing = sorted(Unmatched(*key[:5], _seconds(value), key[5]) for key, value in unmatched.items())
    return Report(samples=samples, unmatched=missing, queries=count, dcgm_per_slot_queries=per_slot)


def measure(client: RangeQuerier, flavors: Sequence[FlavorSpec], start: datetime, end: datetime, *,
            scrape_interval: int = DEFAULT_SCRAPE_INTERVAL, max_gap_scrapes: int = DEFAULT_MAX_GAP_SCRAPES,
            share_rule: str = "max", usage_metric: str = DEFAULT_USAGE_METRIC,
            chunk_hours: int = 24, dialect: str = "metricsql", clusters: Sequence[ClusterSource] = (),
            cluster_label: str = DEFAULT_CLUSTER_LABEL, method: str = HOURLY,
            hourly_chunk_hours: int | None = None) -> list[UsageSample]:
    """Usage per (tenant, flavor, hour[, cluster]) in [start, end); the contract is in the module docstring."""
    return measure_report(client, flavors, start, end, scrape_interval=scrape_interval,
                          max_gap_scrapes=max_gap_scrapes, share_rule=share_rule,
                          usage_metric=usage_metric, chunk_hours=chunk_hours, dialect=dialect,
                          clusters=clusters, cluster_label=cluster_label, method=method,
                          hourly_chunk_hours=hourly_chunk_hours).samples
