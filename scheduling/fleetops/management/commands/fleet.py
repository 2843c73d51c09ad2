"""gpufleet fleet idle|utilisation — fleet operations from the TSDB (JSON for scripts)."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.management.commands._billing_cli import dumps, parse_time
from billing.metering.usage import MeteringInputError
from infra.errors import PermanentError, TransientError
from scheduling.fleetops import service
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Fleet operations: idle GPU findings and utilisation per tenant and flavor."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        idle = sub.add_parser("idle", help="allocations idle for at least the minimum run, with their cost")
        idle.add_argument("--start", required=True)
        idle.add_argument("--end", required=True)
        idle.add_argument("--tenant", default=None)
        idle.add_argument("--min-idle", type=int, default=None, dest="min_idle",
                          help="minutes (default: the fleet's or the tenant's setting, 60)")
        idle.add_argument("--json", action="store_true")
        util = sub.add_parser("utilisation", help="allocated vs active GPU-seconds per tenant and flavor")
        util.add_argument("--start", required=True)
        util.add_argument("--end", required=True)
        util.add_argument("--tenant", default=None)
        util.add_argument("--json", action="store_true")

    def handle(self, *args: object, verb: str, **opts: object) -> None:
        start, end = parse_time(str(opts["start"]), "start"), parse_time(str(opts["end"]), "end")
        if end <= start:
            raise CommandError("--end: must be after --start")
        tenant = opts.get("tenant")
        if tenant is not None and not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"--tenant: no tenant with slug {tenant!r}")
        tenants = [str(tenant)] if tenant else None
        try:
            if verb == "idle":
                minimum = opts.get("min_idle")
                if minimum is not None and int(minimum) < 1:  # type: ignore[call-overload]
                    raise CommandError("--min-idle: must be at least 1 minute")
                rows = service.idle_findings(start, end, tenants=tenants,
                                             min_idle_minutes=minimum)  # type: ignore[arg-type]
            else:
                for name, moment in (("start", start), ("end", end)):
                    if moment != moment.replace(minute=0, second=0, microsecond=0):
                        raise CommandError(f"--{name}: utilisation is per hour; give a whole hour")
                rows = service.utilisation(start, end, tenants=tenants)
        except MeteringInputError as exc:
            raise CommandError(f"--{exc.field}: {exc.reason}") from exc
        except (TransientError, PermanentError) as exc:
            raise CommandError(str(exc)) from exc
        if opts.get("json"):
            self.stdout.write(dumps(rows))
            return
        for row in rows:
            if verb == "idle":
                hours = timedelta(seconds=row["idle_seconds"])
                self.stdout.write(f"{row['tenant']:<16} {row['namespace']}/{row['pod']:<30} {row['flavor']:<12} "
                                  f"{row['start']} idle {hours} ({row['signal']}) {row['memory_mib']} MiB "
                                  f"{row['cost']} {row['currency']}")
            else:
                self.stdout.write(f"{row['tenant']:<16} {row['flavor']:<12} allocated {row['allocated_seconds']} s "
                                  f"active {row['active_seconds']} s efficiency {row['efficiency']}")
