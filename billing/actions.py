"""Every write to billing. One transaction, one AuditEvent; bad input changes nothing.

Callers (CLI, API, portal, Celery tasks) never write billing rows themselves. I/O (VictoriaMetrics,
OpenCost) happens before an action is called; its results are passed in.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from operator import attrgetter
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Exists, IntegerField, OuterRef, Q, Value, When
from django.db.models.functions import TruncDay

from gpufleet import clock
from gpufleet.audit.record import record, record_many
from gpufleet.core import conf, pgcopy
from gpufleet.core.errors import ActionError, Conflict
from scheduling.models import DEFAULT_CLUSTER, Cluster, Flavor, Placement, default_cluster_id
from tenants.models import Tenant

from . import invoicing
from .models import Invoice, InvoiceCounter, InvoiceLine, Price, UsageCollection, UsageRecord
from .periods import check_currency, parse_period, period_bounds
from .sums import ExactSum

HOUR = timedelta(hours=1)
ZERO = Decimal(0)


# --- usage ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One measured tenant x flavor x hour (on one cluster). Same attribute names as billing.metering's
    UsageSample, so collection hands the measurer's samples over as they are."""

    tenant_slug: str
    flavor: str
    hour_start: datetime
    unit_seconds: Decimal
    gpu_equivalent_seconds: Decimal
    cluster: str = ""  # the cluster's name; "" = the default cluster (a single-cluster installation)


def _check_window(start: datetime, end: datetime) -> None:
    errors: dict[str, list[str]] = {}
    for name, value in (("start", start), ("end", end)):
        if value.tzinfo is None:
            errors[name] = ["must carry a time zone (UTC)"]
        elif value.minute or value.second or value.microsecond:
            errors[name] = ["must be on a whole hour (usage is stored per hour)"]
    if not errors and end <= start:
        errors["end"] = ["must be after start"]
    if not errors and end > clock.now() + HOUR:
        errors["end"] = ["is in the future"]
    if errors:
        raise ActionError(errors)


def store_usage(start: datetime, end: datetime, samples: Iterable[Sample | Any],
                unmatched: Iterable[str] = ()) -> UsageCollection:
    """Replace every usage row of [start, end) with `samples`: collecting a window twice replaces,
    never adds. Samples of unknown tenants, flavors or clusters, and of a tenant on a cluster it is not
    placed on, are counted in `skipped`, not stored."""
    return store_usage_batches(start, end, [(samples, unmatched)])


@dataclass
class _Owners:
    """Ids of everything a usage row refers to, and which tenant is placed on which cluster."""

    tenants: dict[str, int]
    flavors: dict[str, int]
    clusters: dict[str, int]
    cluster_names: dict[int, str]
    default_cluster: int | None  # None when an installation has no cluster `default` (any more)
    placed: set[tuple[int, int]]
    locked: dict[Any, set[int]] = dataclass_field(default_factory=dict)  # ids locked FOR KEY SHARE, by model

    @classmethod
    def load(cls) -> _Owners:
        clusters = dict(Cluster.objects.values_list("name", "id"))
        return cls(dict(Tenant.objects.values_list("slug", "id")), dict(Flavor.objects.values_list("name", "id")),
                   clusters, {pk: name for name, pk in clusters.items()}, clusters.get(DEFAULT_CLUSTER),
                   set(Placement.objects.values_list("tenant_id", "cluster_id")))


def store_usage_batches(start: datetime, end: datetime,
                        batches: Iterable[tuple[Iterable[Sample | Any], Iterable[str]]]) -> UsageCollection:
    """`store_usage` for samples that arrive in batches (e.g. one per measured day, while the next
    day is still being measured): the window's rows are deleted first and each batch is written as
    it arrives, all in one transaction, so a failure anywhere leaves the stored usage unchanged.

    A namespace's usage on a cluster is its tenant's only if the tenant is placed on that cluster
    (`scheduling.Placement`); otherwise it is listed in `skipped["unplaced"]` as "<slug> on <cluster>"."""
    _check_window(start, end)
    owners = _Owners.load()
    now = clock.now()
    skipped: dict[str, set[str]] = defaultdict(set)
    seen: dict[tuple[int, int, int], set[datetime]] = {}  # hours stored so far, per (tenant, flavor, cluster)
    records, total = 0, Decimal(0)
    with transaction.atomic():
        # Usage rows are re-derivable from the TSDB and the next hourly run re-collects: the commit
        # need not wait for the WAL of ~10^5 rows to reach disk (atomicity is unaffected).
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        replaced = UsageRecord.objects.filter(hour__gte=start, hour__lt=end)._raw_delete(
            UsageRecord.objects.db)  # nothing references usage rows: no cascade, no signals to honour
        for samples, unmatched in batches:
            rows = _usage_values(samples, unmatched, start, end, owners, skipped)
            for ids, hours in rows.items():
                stored = seen.setdefault(ids, set())
                if not stored.isdisjoint(hours):
                    raise ActionError({"samples": ["two batches measured the same tenant, flavor, cluster and hour"]})
                stored.update(hours)
            _lock_owners(rows, owners)
            total += _insert_usage(rows, now, start, end)
            records += sum(map(len, rows.values()))
        if records >= ANALYZE_AFTER_ROWS:
            # A month COPYed at once leaves the planner with the old row count until autovacuum's next
            # analyze: drafting right after then sorted 323,400 rows on disk to group them by day
            # (estimated 1,315) instead of hashing them. ANALYZE samples a fixed number of rows, and in
            # this transaction it sees the new ones.
            with connection.cursor() as cursor:
                cursor.execute(f"ANALYZE {UsageRecord._meta.db_table}")
        run = UsageCollection.objects.create(
            window_start=start, window_end=end, collected_at=now, records=records, replaced=replaced,
            unit_seconds=total, skipped={k: sorted(v) for k, v in sorted(skipped.items())},
        )
        record("billing.usage.collect", run, after={
            "window": [start.isoformat(), end.isoformat()], "records": run.records, "replaced": replaced,
            "unit_seconds": str(run.unit_seconds), "skipped": run.skipped,
        })
    return run


# (tenant_id, flavor_id, cluster_id) -> hour -> [unit_seconds, gpu_equivalent_seconds]: plain values, not model
# instances (a month of a large fleet is 3-5 x 10^5 rows), grouped as the unique index orders them, so the
# COPY inserts each group's hours next to each other in the index (figures: docs/adr/0002).
UsageRows = dict[tuple[int, int, int], dict[datetime, list[Decimal]]]


def _usage_values(samples: Iterable[Any], unmatched: Iterable[str], start: datetime, end: datetime,
                  owners: _Owners, skipped: dict[str, set[str]]) -> UsageRows:
    """The batch's rows by (tenant, flavor, cluster) ids, then hour; this loop runs once per sample, so it is
    kept lean."""
    rows: UsageRows = {}
    for item in unmatched:  # usage the measurer saw but no flavor matches
        skipped["unmatched"].add(item)
    tenants, flavors, clusters, placed = owners.tenants, owners.flavors, owners.clusters, owners.placed
    default = owners.default_cluster

    def resolve(slug: str, flavor: str, cluster: str) -> dict[datetime, list[Decimal]] | None:
        """The hours of one (tenant, flavor, cluster), or None (its samples are skipped, and why is noted)."""
        tenant_id, flavor_id = tenants.get(slug), flavors.get(flavor)
        cluster_id = clusters.get(cluster) if cluster else default
        if tenant_id is None:
            skipped["tenants"].add(slug)
        elif flavor_id is None:
            skipped["flavors"].add(flavor)
        elif cluster_id is None:
            skipped["clusters"].add(cluster or DEFAULT_CLUSTER)
        elif (tenant_id, cluster_id) not in placed:
            skipped["unplaced"].add(f"{slug} on {cluster or owners.cluster_names[cluster_id]}")
        else:
            return rows.setdefault((tenant_id, flavor_id, cluster_id), {})
        return None

    # A batch's ~10^5 samples name a few hundred (tenant, flavor, cluster), the measurer's one after another:
    # resolved once each, and looked up again only when the next sample names another one.
    resolved: dict[tuple[str, str, str], dict[datetime, list[Decimal]] | None] = {}
    names: tuple[str, str, str] | None = None
    hours: dict[datetime, list[Decimal]] | None = None
    for s in samples:
        if names is None or s.tenant_slug != names[0] or s.flavor != names[1] or s.cluster != names[2]:
            names = (s.tenant_slug, s.flavor, s.cluster)
            hours = resolved.get(names, False)  # type: ignore[arg-type]
            if hours is False:
                hours = resolved[names] = resolve(*names)
        if hours is None:
            continue
        hour = s.hour_start
        unit, gpu = s.unit_seconds, s.gpu_equivalent_seconds
        if not (start <= hour < end) or unit < ZERO or gpu < ZERO:  # Decimal against Decimal: no int conversion
            raise ActionError({"samples": [f"sample {s.tenant_slug}/{s.flavor}@{hour.isoformat()} is outside "
                                           "the window or negative"]})
        row = hours.get(hour)
        if row is None:
            hours[hour] = [unit, gpu]
        else:  # the measurer should not split an hour; if it does, the parts add up
            row[0] += unit
            row[1] += gpu
    return rows


def _lock_owners(rows: UsageRows, owners: _Owners) -> None:
    """Lock the tenants, flavors and clusters the rows refer to as a foreign-key check would (FOR KEY
    SHARE: they cannot be deleted until this transaction ends), once each, and refuse rows whose
    referenced row vanished since `_Owners.load` (the usage table has no per-row FK triggers)."""
    wanted: dict[Any, set[int]] = {Tenant: set(), Flavor: set(), Cluster: set()}
    for (t, f, c), hours in rows.items():
        if hours:
            wanted[Tenant].add(t)
            wanted[Flavor].add(f)
            wanted[Cluster].add(c)
    with connection.cursor() as cursor:
        for model, ids in wanted.items():
            ids -= owners.locked.setdefault(model, set())
            if not ids:
                continue
            table = model._meta.db_table  # a model's table, never input
            cursor.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) FOR KEY SHARE", [sorted(ids)])  # noqa: S608
            found = {pk for (pk,) in cursor.fetchall()}
            if found != ids:
                raise Conflict(f"{model._meta.verbose_name} {sorted(ids - found)} was deleted while usage was "
                               "being stored; collect again")
            owners.locked[model] |= ids


# Rows stored by one collection above which the usage table's planner statistics are refreshed at once.
ANALYZE_AFTER_ROWS = 50_000
# The columns each usage row below gives, in its order; their types come from the model (gpufleet.core.pgcopy).
USAGE_COLUMNS = ("tenant_id", "flavor_id", "cluster_id", "hour", "unit_seconds", "gpu_equivalent_seconds",
                 "collected_at", "window_start", "window_end")


def _insert_usage(rows: UsageRows, now: datetime, start: datetime, end: datetime) -> Decimal:
    """Write the rows through one binary COPY per batch (a month of 1,000 GPUs is 3-5 x 10^5 rows; why and
    the figures: docs/adr/0002); returns their unit-seconds."""
    units: list[Decimal] = []
    add = units.append

    def values() -> Iterable[tuple[Any, ...]]:
        for (t, f, c), hours in rows.items():
            for h, (u, g) in hours.items():
                add(u)
                yield t, f, c, h, u, g, now, start, end

    pgcopy.copy_rows(UsageRecord, USAGE_COLUMNS, values())
    return sum(units, Decimal(0))


# --- prices ---------------------------------------------------------------------------------------

# A plain decimal as people write money: ASCII digits, one optional point. No exponent ("1e12"), no
# digit separators ("1_000", which Decimal() accepts), no "Infinity"/"NaN", no non-ASCII digits.
DECIMAL_TEXT = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# How far ahead a price may be set: far enough to announce next year's prices, near enough that a
# mistyped 9999-12-31 cannot become the last price and block every earlier one.
PRICE_HORIZON = timedelta(days=5 * 366)
DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _decimal(value: Any, field: str, errors: dict[str, list[str]], *, max_digits: int = 18,
             decimal_places: int = 6) -> Decimal | None:
    """A non-negative Decimal that fits its column (max_digits, decimal_places), or an error for `field`."""
    text = str(value).strip() if isinstance(value, (str, int, float, Decimal)) and not isinstance(value, bool) else ""
    if not DECIMAL_TEXT.fullmatch(text):
        errors[field] = [f"must be a decimal number like 2.50 (got {value!r})"]
        return None
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):
        errors[field] = [f"must be a decimal number (got {value!r})"]
        return None
    if number < 0:
        errors[field] = ["must not be negative"]
        return None
    if number.as_tuple().exponent < -decimal_places:  # type: ignore[operator]
        errors[field] = [f"has more than {decimal_places} decimal places"]
        return None
    limit = Decimal(10) ** (max_digits - decimal_places)
    if number >= limit:
        errors[field] = [f"must be less than {limit:f}"]
        return None
    return number.copy_abs() if number.is_zero() else number  # "-0" is zero, not -0.000000


def _parse_date(value: Any, field: str, errors: dict[str, list[str]]) -> date | None:
    if value in (None, ""):
        return clock.today()
    if isinstance(value, datetime):
        value = value.date()
    if not isinstance(value, date):
        try:
            if not isinstance(value, str) or not DATE_TEXT.fullmatch(value.strip()):
                raise ValueError(value)
            value = date.fromisoformat(value.strip())
        except ValueError:
            errors[field] = [f"must be a date like 2026-01-01 (got {value!r})"]
            return None
    horizon = clock.today() + PRICE_HORIZON
    if value > horizon:
        errors[field] = [f"must be no later than {horizon.isoformat()} (prices are set at most 5 years ahead)"]
        return None
    return value


def _price_cluster(cluster: Any, errors: dict[str, list[str]]) -> Cluster | None:
    """None (every cluster) for a blank value, else the named cluster or an error for `cluster`."""
    if cluster in (None, ""):
        return None
    found = Cluster.objects.filter(name=cluster).first() if isinstance(cluster, str) else None
    if found is None:
        errors["cluster"] = [f"unknown cluster {cluster!r}"]
    return found


def set_price(flavor: Any, per_unit_hour: Any, currency: Any, effective_from: Any = None, *,
              cluster: Any = None, source: str = Price.Source.ENTERED, opencost_gpu_hourly: Decimal | None = None,
              markup: Decimal | None = None) -> Price:
    """A new price for a flavor from a date on, on every cluster (`cluster` blank) or on one cluster,
    where it wins over the every-cluster price. It closes the open-ended price of the same flavor,
    cluster and currency before it; it may not start on or before an existing price's start, nor inside a
    closed range (overlap)."""
    errors: dict[str, list[str]] = {}
    flavor_obj = Flavor.objects.filter(name=flavor).first() if isinstance(flavor, str) else None
    if flavor_obj is None:
        errors["flavor"] = [f"unknown flavor {flavor!r}"]
    cluster_obj = _price_cluster(cluster, errors)
    amount = _decimal(per_unit_hour, "per_unit_hour", errors)
    if problem := check_currency(currency):
        errors["currency"] = [problem]
    start = _parse_date(effective_from, "effective_from", errors)
    if errors:
        raise ActionError(errors)
    with transaction.atomic():
        # Lock the flavor row: concurrent price changes for it queue up instead of overlapping.
        flavor_obj = Flavor.objects.select_for_update().get(pk=flavor_obj.pk)  # type: ignore[union-attr]
        existing = list(Price.objects.filter(flavor=flavor_obj, currency=currency, cluster=cluster_obj)
                        .order_by("effective_from"))
        where = f" on {cluster_obj.name}" if cluster_obj else ""
        for price in existing:
            ends = price.effective_to
            if price.effective_from >= start or (ends is not None and ends > start):  # type: ignore[operator]
                raise ActionError({"effective_from": [
                    f"overlaps the {price.per_unit_hour} {currency} price{where} effective "
                    f"{price.effective_from}..{ends or 'open'}; prices cannot be changed retroactively"]})
        _check_not_finalized(flavor_obj, cluster_obj, currency, start)  # type: ignore[arg-type]
        previous = existing[-1] if existing and existing[-1].effective_to is None else None
        if previous is not None:
            before = previous.snapshot()
            previous.effective_to = start
            previous.save(update_fields=["effective_to"])
            record("billing.price.close", previous, before=before, after=previous.snapshot())
        price = Price.objects.create(
            flavor=flavor_obj, cluster=cluster_obj, currency=currency, per_unit_hour=amount, effective_from=start,
            source=source, opencost_gpu_hourly=opencost_gpu_hourly, markup=markup,
        )
        record("billing.price.set", price, after=price.snapshot())
    return price


def _check_not_finalized(flavor: Flavor, cluster: Cluster | None, currency: str, start: date) -> None:
    """A price may not reach into a month whose invoices are already finalized (for a cluster's own
    price: finalized with usage on that cluster, or drafted before clusters existed)."""
    period = start.replace(day=1)
    finalized = Invoice.objects.filter(currency=currency, period__gte=period, state=Invoice.State.FINALIZED,
                                       lines__flavor=flavor)
    if cluster is not None:
        finalized = finalized.filter(Q(lines__cluster=cluster) | Q(lines__cluster__isnull=True))
    if finalized.exists():
        raise ActionError({"effective_from": [
            f"invoices from {period:%Y-%m} on are finalized for {flavor.name}"
            f"{' on ' + cluster.name if cluster else ''}; choose a later date"]})


def derive_price(flavor: Any, currency: Any, opencost_gpu_hourly: Any, markup: Any,
                 effective_from: Any = None, *, cluster: Any = None) -> Price:
    """Price = OpenCost's GPU hourly cost of the flavor's GPU model x the flavor's weight x markup."""
    errors: dict[str, list[str]] = {}
    hourly = _decimal(opencost_gpu_hourly, "opencost_gpu_hourly", errors)
    factor = _decimal(markup, "markup", errors, max_digits=8, decimal_places=4)
    flavor_obj = Flavor.objects.filter(name=flavor).first() if isinstance(flavor, str) else None
    if flavor_obj is None:
        errors["flavor"] = [f"unknown flavor {flavor!r}"]
    if errors:
        raise ActionError(errors)
    amount = (hourly * flavor_obj.weight * factor).quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN)  # type: ignore[operator,union-attr]
    return set_price(flavor, amount, currency, effective_from, cluster=cluster, source=Price.Source.OPENCOST,
                     opencost_gpu_hourly=hourly, markup=factor)


# --- invoices -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OpenCostFigures:
    cost: Decimal | None
    gpu_hours: Decimal | None


def _billing_currency(currency: str | None) -> str:
    currency = currency or conf.BILLING_CURRENCY
    if problem := check_currency(currency):
        raise ActionError({"currency": [problem]})
    return currency


def _usage_sums(tenant_ids: list[int], start: datetime, end: datetime, grain: str, expression: Any) -> Any:
    """(tenant, flavor, cluster, grain, unit-seconds, GPU-equivalent seconds) of [start, end), summed per
    value of `expression` (named `grain`)."""
    return (UsageRecord.objects.filter(tenant_id__in=tenant_ids, hour__gte=start, hour__lt=end)
            .annotate(**{grain: expression}).values("tenant_id", "flavor_id", "cluster_id", grain)
            .annotate(u=ExactSum("unit_seconds"), g=ExactSum("gpu_equivalent_seconds"))
            .order_by(grain, "flavor_id", "cluster_id")
            .values_list("tenant_id", "flavor_id", "cluster_id", grain, "u", "g"))


def _usage_rows(tenant_ids: Iterable[int], start: datetime, end: datetime,
                book: invoicing.PriceBook) -> dict[int, list[invoicing.UsageRow]]:
    """Usage per tenant, flavor, cluster and stretch of days with one price book (`hour` = the stretch's
    first day). Prices start and end only at day boundaries (`PriceBook.change_days`), so inside a stretch
    every flavor and cluster has one price or none, and its rows price exactly as the day rows they sum: a
    month without a price change is one row per tenant, flavor and cluster instead of one per day (200
    tenants on three clusters: 1,800 rows instead of 34,230, and PostgreSQL groups on the ids alone). A
    tenant with usage that no price covers gets day rows instead, so the error names each such day as
    before. One query for every tenant (two when some lack a price)."""
    ids = list(tenant_ids)
    firsts = [start] + [datetime(d.year, d.month, d.day, tzinfo=UTC)
                        for d in book.change_days(start.date(), end.date())]
    # the stretch's number n: its first day is firsts[n]
    stretch = Case(*(When(hour__lt=first, then=Value(n)) for n, first in enumerate(firsts[1:])),
                   default=Value(len(firsts) - 1), output_field=IntegerField())
    names = dict(Flavor.objects.values_list("id", "name"))
    out: dict[int, list[invoicing.UsageRow]] = defaultdict(list)
    unpriced: set[int] = set()
    for t, f, c, n, u, g in _usage_sums(ids, start, end, "stretch", stretch):
        if u > 0 and book.find(f, c, firsts[n].date()) is None:
            unpriced.add(t)
        out[t].append(invoicing.UsageRow(f, names[f], firsts[n], u, g, c))
    if unpriced:
        for t in unpriced:
            out[t] = []
        for t, f, c, day, u, g in _usage_sums(sorted(unpriced), start, end, "day", TruncDay("hour", tzinfo=UTC)):
            out[t].append(invoicing.UsageRow(f, names[f], day, u, g, c))
    return out


def _places() -> dict[int, invoicing.Place]:
    """Every cluster as an invoice line snapshots it (the zone only when it has exactly one)."""
    return {pk: invoicing.Place(pk, name, region, region_name, zones[0] if isinstance(zones, list)
                                and len(zones) == 1 else "")
            for pk, name, region, region_name, zones in Cluster.objects.values_list(
                "pk", "name", "region", "region_name", "zones")}


def _price_rows(currency: str) -> list[invoicing.PriceRow]:
    return [invoicing.PriceRow(p.id, p.flavor_id, p.per_unit_hour, p.effective_from, p.effective_to, p.cluster_id)
            for p in Price.objects.filter(currency=currency)]


def _billed_earlier(tenant: Tenant, period: date, currency: str,
                    places: dict[int, invoicing.Place]) -> list[invoicing.BilledFlavor]:
    """For each finalized earlier invoice: per flavor and cluster, what it (and adjustments since) billed
    vs what the usage rows say now. Lines drafted before clusters existed were the default cluster's."""
    out = []
    default = default_cluster_id()
    earlier = Invoice.objects.filter(tenant=tenant, currency=currency, state=Invoice.State.FINALIZED,
                                     period__lt=period)
    for inv in earlier:
        start, end = period_bounds(inv.period)
        Key = tuple[int, int]
        billed: dict[Key, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        prices: dict[Key, tuple[Decimal, int | None, str]] = {}
        lines = list(InvoiceLine.objects.filter(invoice=inv, kind=InvoiceLine.Kind.USAGE)) + list(
            InvoiceLine.objects.filter(adjusts=inv, kind=InvoiceLine.Kind.ADJUSTMENT,
                                       invoice__state=Invoice.State.FINALIZED))
        for line in lines:
            key = (line.flavor_id, line.cluster_id or default)
            billed[key][0] += line.unit_seconds
            billed[key][1] += line.gpu_equivalent_seconds
            prices.setdefault(key, (line.unit_price, line.price_id, line.flavor_name))
        measured = {
            (row["flavor_id"], row["cluster_id"]): (row["s"], row["g"], row["flavor__name"])
            for row in UsageRecord.objects.filter(tenant=tenant, hour__gte=start, hour__lt=end)
            .values("flavor_id", "flavor__name", "cluster_id")
            .annotate(s=ExactSum("unit_seconds"), g=ExactSum("gpu_equivalent_seconds")).order_by()
        }
        for key in sorted(set(billed) | set(measured)):
            flavor_id, cluster_id = key
            m_s, m_g, name = measured.get(key, (Decimal(0), Decimal(0), ""))
            b_s, b_g = billed.get(key, [Decimal(0), Decimal(0)])
            if m_s == b_s:
                continue
            if key in prices:
                unit_price, price_id, name = prices[key]
            else:  # a flavor/cluster the invoice did not bill at all: price it as of that period
                price = invoicing.PriceBook(_price_rows(currency)).find(flavor_id, cluster_id, inv.period)
                if price is None:
                    raise ActionError({"price": [f"no {currency} price for {name} in {inv.period:%Y-%m}"]})
                unit_price, price_id = price.per_unit_hour, price.id
            out.append(invoicing.BilledFlavor(inv.id, inv.number or "", inv.period, flavor_id, name,
                                              b_s, m_s, m_g, b_g, unit_price, price_id,
                                              places.get(cluster_id, invoicing.NOWHERE)))
    return out


def _fleet_idle(start: datetime, end: datetime) -> tuple[Decimal, Decimal]:
    """Fleet GPU-equivalent seconds used and offered in the window (flavors partition the fleet)."""
    used = UsageRecord.objects.filter(hour__gte=start, hour__lt=end).aggregate(
        g=ExactSum("gpu_equivalent_seconds"))["g"] or Decimal(0)
    seconds = Decimal(int((end - start).total_seconds()))
    capacity = sum((f.capacity * f.weight * seconds for f in Flavor.objects.all()), Decimal(0))
    return used, capacity


def _check_period(period: date) -> None:
    if period > clock.this_month():
        raise ActionError({"period": [f"{period:%Y-%m} is in the future"]})


@dataclass
class _Batch:
    """Everything drafting needs, loaded with a handful of queries for all tenants at once."""

    period: date
    currency: str
    start: datetime
    end: datetime
    prices: invoicing.PriceBook
    places: dict[int, invoicing.Place]
    usage: dict[int, list[invoicing.UsageRow]]
    live: dict[int, Invoice]
    voided: dict[int, Invoice]
    with_history: set[int]  # tenants with finalized invoices of earlier months (adjustments possible)
    fleet: tuple[Decimal, Decimal] | None


def _load_batch(tenant_ids: list[int], period: date, currency: str) -> _Batch:
    start, end = period_bounds(period)
    invoices = Invoice.objects.filter(tenant_id__in=tenant_ids, period=period, currency=currency)
    # Locked: a concurrent finalize either finished before (we see it finalized and keep it) or waits.
    live = {inv.tenant_id: inv for inv in invoices.exclude(state=Invoice.State.VOID).select_for_update()}
    voided: dict[int, Invoice] = {}
    for inv in invoices.filter(state=Invoice.State.VOID, reissued_as__isnull=True).order_by("voided_at"):
        voided[inv.tenant_id] = inv  # the latest void one without a reissue
    history = set(Invoice.objects.filter(tenant_id__in=tenant_ids, currency=currency, period__lt=period,
                                         state=Invoice.State.FINALIZED).values_list("tenant_id", flat=True))
    fleet = _fleet_idle(start, end) if conf.BILLING_IDLE_SHARE else None
    prices = invoicing.PriceBook(_price_rows(currency))
    return _Batch(period, currency, start, end, prices, _places(), _usage_rows(tenant_ids, start, end, prices), live,
                  voided, history, fleet)


@dataclass
class _Drafted:
    invoice: Invoice
    lines: list[invoicing.Line]
    before: dict[str, Any] | None  # the live draft's snapshot, None for a new invoice


def _draft_one(tenant: Tenant, batch: _Batch, opencost: OpenCostFigures | None) -> Invoice | _Drafted | None:
    """The finalized invoice unchanged, the computed draft (written by `_write_drafts`), or None."""
    live = batch.live.get(tenant.pk)
    if live is not None and live.state == Invoice.State.FINALIZED:
        return live
    rows = batch.usage.get(tenant.pk, [])
    draft = invoicing.usage_lines(rows, batch.prices, batch.start, batch.end, batch.currency, batch.places)
    if draft.missing_prices:
        missing = sorted(set(draft.missing_prices))
        raise ActionError({"price": [f"no {batch.currency} price for {', '.join(missing[:5])}"
                                     + (" ..." if len(missing) > 5 else "") + f" (tenant {tenant.slug})"]})
    if tenant.pk in batch.with_history:
        draft.lines.extend(invoicing.adjustment_lines(
            _billed_earlier(tenant, batch.period, batch.currency, batch.places), batch.currency, UTC))
    if batch.fleet is not None:
        mine = sum((r.gpu_equivalent_seconds for r in rows), Decimal(0))
        idle = invoicing.idle_line(draft.lines, mine, *batch.fleet, batch.start, batch.end, batch.currency)
        if idle is not None:
            draft.lines.append(idle)
    replaced = batch.voided.get(tenant.pk) if live is None else None
    if not draft.lines and live is None and replaced is None:
        return None
    if live is not None:
        live.tenant = tenant  # the row locked above (same pk): the snapshots need not fetch it again
    invoice = live or Invoice(tenant=tenant, period=batch.period, currency=batch.currency, replaces=replaced)
    before = _snapshot(invoice) if live is not None else None
    for name, value in draft.invoice_totals().items():
        setattr(invoice, name, value)
    if opencost is not None:
        invoice.opencost_cost, invoice.opencost_gpu_hours = opencost.cost, opencost.gpu_hours
    invoice.drafted_at = clock.now()
    return _Drafted(invoice, draft.lines, before)


def _write_drafts(drafted: list[_Drafted]) -> None:
    """New invoices, all lines and all audit events each in one statement (batched): drafting a month
    for every tenant is a few round trips, not a few per tenant. Redrafted invoices are saved one by one
    (their model guard re-checks the state) and lose their old lines first."""
    Invoice.objects.bulk_create([d.invoice for d in drafted if d.before is None], batch_size=500)
    for d in drafted:
        if d.before is not None:
            d.invoice.save()
    redrafted = [d.invoice.pk for d in drafted if d.before is not None]
    if redrafted:  # nothing refers to lines
        InvoiceLine.objects.filter(invoice_id__in=redrafted)._raw_delete(InvoiceLine.objects.db)
    _insert_lines((d.invoice.pk, i, line) for d in drafted for i, line in enumerate(d.lines, start=1))
    record_many(("billing.invoice.draft", d.invoice,
                 {"before": d.before, "after": _snapshot(d.invoice), "tenant_slug": d.invoice.tenant.slug})
                for d in drafted)


# An invoice line's columns, from the model: what `_line_values` fills, each from the computed line
# (invoicing.Line) or its place (invoicing.Place) by the same name, or from the invoice and position.
LINE_COLUMNS = pgcopy.columns(InvoiceLine)
_LINE_OWN = ("invoice_id", "position", "description")  # not read from the line as they are


def _line_getters() -> list[Callable[[invoicing.Line], Any] | None]:
    """For each of LINE_COLUMNS: how to read it from a computed line (None: `_line_values` sets it)."""
    line_fields = {f.name for f in fields(invoicing.Line)}
    place_fields = {f.name for f in fields(invoicing.Place)}
    getters: list[Callable[[invoicing.Line], Any] | None] = []
    for column in LINE_COLUMNS:
        if column in _LINE_OWN:
            getters.append(None)
        elif column in line_fields:
            getters.append(attrgetter(column))
        elif column in place_fields:
            getters.append(attrgetter(f"place.{column}"))
        else:  # a field added to InvoiceLine must be computed on invoicing.Line (or its Place) too
            raise ImproperlyConfigured(f"InvoiceLine.{column} has no value on billing.invoicing.Line")
    return getters


_LINE_GETTERS = _line_getters()
_INVOICE, _POSITION, _DESCRIPTION = (LINE_COLUMNS.index(name) for name in _LINE_OWN)
_DESCRIPTION_LENGTH = InvoiceLine._meta.get_field("description").max_length


def _line_values(invoice_id: int, position: int, line: invoicing.Line) -> list[Any]:
    values = [None if get is None else get(line) for get in _LINE_GETTERS]
    values[_INVOICE], values[_POSITION] = invoice_id, position
    values[_DESCRIPTION] = line.description[:_DESCRIPTION_LENGTH]
    return values


def _insert_lines(lines: Iterable[tuple[int, int, invoicing.Line]]) -> None:
    """Invoice lines (invoice id, position, computed line) in one binary COPY (gpufleet.core.pgcopy): a month
    of 200 tenants on three clusters is 1,800 lines of 22 values, which bulk_create prepared field by field and
    the client cursor quoted one by one (docs/adr/0002)."""
    pgcopy.copy_rows(InvoiceLine, LINE_COLUMNS, (_line_values(*item) for item in lines))


def draft_invoice(tenant: Tenant, period: Any, currency: str | None = None,
                  opencost: OpenCostFigures | None = None) -> Invoice | None:
    """Compute the tenant's invoice for a month from the usage rows. Idempotent: drafting again
    rebuilds the same draft; a finalized invoice is returned unchanged. None when nothing to bill."""
    invoices = draft_all(period, currency, [tenant], {tenant.slug: opencost} if opencost else None)
    return invoices[0] if invoices else None


def draft_all(period: Any, currency: str | None = None, tenants: Iterable[Tenant] | None = None,
              opencost: Mapping[str, OpenCostFigures] | None = None) -> list[Invoice]:
    """Draft every tenant with usage (or an invoice) in the month, or the given tenants. One
    transaction: a tenant that cannot be drafted (say, a flavor without a price) fails the whole run
    with a clear error and nothing is written."""
    period = parse_period(period)
    _check_period(period)
    currency = _billing_currency(currency)
    start, end = period_bounds(period)
    with transaction.atomic():
        if tenants is None:
            # EXISTS per tenant: one probe of the (tenant, flavor, cluster, hour) index each, stopping at
            # the first row, instead of a DISTINCT over the month's rows (6 ms vs 110 ms for 323,400 rows).
            month = UsageRecord.objects.filter(tenant_id=OuterRef("pk"), hour__gte=start, hour__lt=end)
            ids = set(Tenant.objects.filter(Exists(month)).values_list("pk", flat=True))
            ids |= set(Invoice.objects.filter(period=period).values_list("tenant_id", flat=True))
        else:
            ids = {t.pk for t in tenants}
        # Row locks in a fixed order: concurrent drafts of overlapping tenant sets cannot deadlock.
        locked = list(Tenant.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
        batch = _load_batch([t.pk for t in locked], period, currency)
        out: list[Invoice | _Drafted] = []
        for tenant in sorted(locked, key=lambda t: t.slug):
            result = _draft_one(tenant, batch, (opencost or {}).get(tenant.slug))
            if result is not None:
                out.append(result)
        _write_drafts([d for d in out if isinstance(d, _Drafted)])
    return [d.invoice if isinstance(d, _Drafted) else d for d in out]


def _snapshot(invoice: Invoice) -> dict[str, Any]:
    return {
        "tenant": invoice.tenant.slug, "period": invoice.period_label, "currency": invoice.currency,
        "state": invoice.state, "number": invoice.number, "total": str(invoice.total),
        "content_hash": invoice.content_hash,
    }


def invoice_content(invoice: Invoice) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The canonical content the hash covers."""
    header = {
        "number": invoice.number, "tenant": invoice.tenant.slug, "period": invoice.period_label,
        "currency": invoice.currency, "subtotal": str(invoice.subtotal), "total": str(invoice.total),
        "finalized_at": invoice.finalized_at.isoformat() if invoice.finalized_at else None,
        "replaces": invoice.replaces.number if invoice.replaces_id else None,  # type: ignore[union-attr]
    }
    lines = [
        {"position": ln.position, "kind": ln.kind, "flavor": ln.flavor_name, "description": ln.description,
         "quantity": str(ln.quantity), "unit_price": str(ln.unit_price), "amount": str(ln.amount),
         "unit_seconds": str(ln.unit_seconds), "gpu_equivalent_seconds": str(ln.gpu_equivalent_seconds),
         "charge_start": ln.charge_start.isoformat(), "charge_end": ln.charge_end.isoformat(),
         # Only when known: invoices finalized before clusters existed keep hashing to what they stored.
         **({"cluster": ln.cluster_name, "region": ln.region, "region_name": ln.region_name,
             "availability_zone": ln.availability_zone} if ln.cluster_name else {})}
        for ln in invoice.lines.order_by("position")
    ]
    return header, lines


def _lock_invoice(invoice_id: int) -> Invoice | None:
    """Lock the tenant, then the invoice: the order drafting uses, so the two never deadlock."""
    tenant_id = Invoice.objects.filter(pk=invoice_id).values_list("tenant_id", flat=True).first()
    if tenant_id is None:
        return None
    Tenant.objects.select_for_update().filter(pk=tenant_id).first()
    return Invoice.objects.select_for_update(of=("self",)).select_related("tenant").filter(pk=invoice_id).first()


def finalize(invoice_id: int) -> Invoice:
    """Freeze a draft: take the next gapless number of the year, hash the content. Finalizing a
    finalized invoice returns it unchanged (two concurrent calls yield one number)."""
    with transaction.atomic():
        invoice = _lock_invoice(invoice_id)
        if invoice is None:
            raise ActionError({"invoice": [f"no invoice {invoice_id}"]})
        if invoice.state == Invoice.State.FINALIZED:
            return invoice
        if invoice.state == Invoice.State.VOID:
            raise Conflict(f"invoice {invoice.number} is void; reissue it instead")
        _, end = period_bounds(invoice.period)
        now = clock.now()
        if end > now:
            raise ActionError({"period": [f"{invoice.period_label} has not ended; it can be finalized from "
                                          f"{end.date().isoformat()}"]})
        before = _snapshot(invoice)
        year = now.year
        InvoiceCounter.objects.bulk_create([InvoiceCounter(year=year, last=0)], ignore_conflicts=True)
        counter = InvoiceCounter.objects.select_for_update().get(year=year)
        counter.last += 1
        counter.save(update_fields=["last"])
        invoice.number_year, invoice.number_seq = year, counter.last
        invoice.number = f"{conf.INVOICE_PREFIX}-{year}-{counter.last:06d}"
        invoice.finalized_at = now
        invoice.state = Invoice.State.FINALIZED
        header, lines = invoice_content(invoice)
        invoice.content_hash = invoicing.content_hash(header, lines)
        invoice._transition = True  # type: ignore[attr-defined]
        invoice.save()
        record("billing.invoice.finalize", invoice, before=before, after=_snapshot(invoice),
               tenant_slug=invoice.tenant.slug)
    return invoice


def void(invoice_id: int, reason: str) -> Invoice:
    """Void a finalized invoice (it keeps its number: numbering stays gapless). Reissue afterwards."""
    if not isinstance(reason, str) or not reason.strip():
        raise ActionError({"reason": ["is required: say why the invoice is void"]})
    with transaction.atomic():
        invoice = _lock_invoice(invoice_id)
        if invoice is None:
            raise ActionError({"invoice": [f"no invoice {invoice_id}"]})
        if invoice.state == Invoice.State.VOID:
            return invoice
        if invoice.state != Invoice.State.FINALIZED:
            raise Conflict("only finalized invoices can be voided; a draft is simply redrafted")
        before = _snapshot(invoice)
        invoice.state, invoice.voided_at, invoice.void_reason = Invoice.State.VOID, clock.now(), reason.strip()
        invoice._transition = True  # type: ignore[attr-defined]
        invoice.save(update_fields=["state", "voided_at", "void_reason"])
        record("billing.invoice.void", invoice, before=before, after={**_snapshot(invoice), "reason": reason},
               tenant_slug=invoice.tenant.slug)
    return invoice


def reissue(invoice_id: int, opencost: OpenCostFigures | None = None) -> Invoice:
    """A new draft for a void invoice's tenant and month, from the usage rows as they are now."""
    invoice = Invoice.objects.select_related("tenant").filter(pk=invoice_id).first()
    if invoice is None:
        raise ActionError({"invoice": [f"no invoice {invoice_id}"]})
    if invoice.state != Invoice.State.VOID:
        raise Conflict(f"invoice {invoice.number or invoice.pk} is {invoice.state}; void it before reissuing")
    try:
        new = draft_invoice(invoice.tenant, invoice.period, invoice.currency, opencost)
    except IntegrityError as exc:  # pragma: no cover - a concurrent reissue won
        raise Conflict("the invoice was reissued concurrently") from exc
    if new is None:
        raise Conflict("nothing to bill for this tenant and month")
    return new
