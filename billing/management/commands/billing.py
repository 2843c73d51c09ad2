"""gpufleet billing collect|usage|invoices|export|reconcile|void|reissue"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from billing import actions, collect, exports, opencost_source, reconciliation
from billing.models import Invoice
from billing.periods import parse_period, period_bounds
from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from gpufleet.core import metrics
from gpufleet.core.errors import ActionError
from infra.errors import PermanentError, TransientError, UnreachableError
from tenants.models import Tenant

from ._billing_cli import action_error, dumps, parse_time, usage_by_flavor


class Command(GpufleetCommand):
    help = "Usage collection, invoices, exports and OpenCost reconciliation."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        c = sub.add_parser("collect", help="measure [start, end) in the TSDB and replace stored usage")
        c.add_argument("--start", required=True)
        c.add_argument("--end", required=True)
        u = sub.add_parser("usage", help="stored usage of a tenant per flavor")
        u.add_argument("--tenant", required=True)
        u.add_argument("--start", required=True)
        u.add_argument("--end", required=True)
        u.add_argument("--json", action="store_true")
        i = sub.add_parser("invoices", help="draft (and optionally finalize) a month's invoices")
        i.add_argument("--period", required=True, help="YYYY-MM")
        i.add_argument("--tenant", default=None)
        i.add_argument("--finalize", action="store_true",
                       help="also finalize the drafts: numbered, immutable (void and reissue to correct)")
        i.add_argument("--yes", action="store_true", help="finalize without asking (scripts)")
        i.add_argument("--dry-run", action="store_true",
                       help="show the invoices (and numbers) it would draft or finalize; write nothing")
        e = sub.add_parser("export", help="finalized invoices of a month for finance")
        e.add_argument("--period", required=True)
        e.add_argument("--format", required=True, choices=exports.FORMATS)
        e.add_argument("--out", default=None)
        r = sub.add_parser("reconcile", help="measured GPU-hours vs OpenCost per tenant")
        r.add_argument("--period", required=True)
        v = sub.add_parser("void", help="void a finalized invoice")
        v.add_argument("--number", required=True)
        v.add_argument("--reason", required=True)
        ri = sub.add_parser("reissue", help="draft a replacement for a void invoice")
        ri.add_argument("--number", required=True)

    def handle(self, *args: object, verb: str, **opts: object) -> None:
        with acting(task=f"cli:billing {verb}"):
            try:
                getattr(self, f"_{verb}")(**opts)
            except ActionError as exc:
                raise action_error(exc) from exc
            except (TransientError, PermanentError) as exc:
                raise CommandError(str(exc)) from exc

    def _collect(self, start: str, end: str, **_: object) -> None:
        begin, finish = parse_time(start, "start"), parse_time(end, "end")
        try:
            run = collect.collect(begin, finish)
        except UnreachableError as exc:
            # One line that says what to do, not the resolver's traceback (the demo's default address is
            # the in-cluster VictoriaMetrics service, which a laptop cannot reach).
            url = metrics.platform_url()
            raise CommandError(f"no metrics server answers at {url}; set GPUFLEET_METRICS_URL to your "
                               "VictoriaMetrics or Prometheus, e.g. GPUFLEET_METRICS_URL=http://127.0.0.1:8428 "
                               "gpufleet billing collect ...") from exc
        self.stdout.write(dumps({"window": [run.window_start.isoformat(), run.window_end.isoformat()],
                                 "records": run.records, "replaced": run.replaced,
                                 "unit_seconds": run.unit_seconds, "skipped": run.skipped}))

    def _usage(self, tenant: str, start: str, end: str, json: bool, **_: object) -> None:
        if not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"--tenant: no tenant with slug {tenant!r}")
        begin, finish = parse_time(start, "start"), parse_time(end, "end")
        if finish <= begin:
            raise CommandError("--end: must be after --start")
        for name, moment in (("start", begin), ("end", finish)):
            if moment.minute or moment.second or moment.microsecond:
                raise CommandError(f"--{name}: must be on a whole hour (usage is stored per UTC hour)")
        rows = usage_by_flavor(tenant, begin, finish)
        if json:
            self.stdout.write(dumps(rows))
            return
        for row in rows:
            self.stdout.write(f"{row['flavor']:<24} {row['unit_seconds']:>16} unit-s "
                              f"{row['gpu_equivalent_seconds']:>16} GPU-s")

    def _invoices(self, period: str, tenant: str | None, finalize: bool, yes: bool = False,
                  dry_run: bool = False, **_: object) -> None:
        month = parse_period(period)
        tenants = None
        if tenant:
            found = Tenant.objects.filter(slug=tenant).first()
            if found is None:
                raise CommandError(f"--tenant: no tenant with slug {tenant!r}")
            tenants = [found]
        if finalize and not dry_run:
            whose = f"tenant {tenant}'s" if tenant else "every tenant's"
            self.confirm(f"Finalize {whose} invoices for {period}? Finalized invoices take the next numbers and "
                         "never change (void and reissue instead).", yes=yes)
        figures = opencost_source.invoice_figures(month)
        # A dry run does the same work in a transaction it rolls back: what is shown is what a real run would
        # write, and nothing is kept (invoice numbers come from a counter row, so none is used up either).
        with transaction.atomic():
            invoices = actions.draft_all(month, tenants=tenants, opencost=figures)
            if finalize:
                invoices = [actions.finalize(inv.pk) for inv in invoices]
            shown = dumps([exports.invoice_json(Invoice.objects.get(pk=inv.pk)) for inv in invoices])
            if dry_run:
                transaction.set_rollback(True)
        self.stdout.write(shown)
        if dry_run:
            self.stderr.write("dry run: nothing was written (no draft kept, no number taken)")

    def _export(self, period: str, format: str, out: str | None, **_: object) -> None:
        content, _media = exports.export(parse_period(period), format)
        if out:
            Path(out).write_text(content, encoding="utf-8")
            self.stderr.write(f"wrote {out}")
        else:
            self.stdout.write(content, ending="")

    def _reconcile(self, period: str, **_: object) -> None:
        start, end = period_bounds(parse_period(period))
        rows = reconciliation.report(start, end, opencost_source.namespace_views(start, end))
        self.stdout.write(json.dumps([row.as_json() for row in rows], indent=2))

    def _void(self, number: str, reason: str, **_: object) -> None:
        invoice = _by_number(number)
        self.stdout.write(dumps(exports.invoice_json(actions.void(invoice.pk, reason))))

    def _reissue(self, number: str, **_: object) -> None:
        invoice = _by_number(number)
        self.stdout.write(dumps(exports.invoice_json(actions.reissue(invoice.pk))))


def _by_number(number: str) -> Invoice:
    invoice = Invoice.objects.filter(number=number).first()
    if invoice is None:
        raise CommandError(f"--number: no invoice {number!r}")
    return invoice
