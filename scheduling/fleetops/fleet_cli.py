"""`gpufleet fleet idle | utilisation` (registered by scheduling.fleet_cli): fleet operations from the TSDB.

`gpufleet fleet idle --start ISO --end ISO [--tenant SLUG] [--min-idle MINUTES] --json` and
`gpufleet fleet utilisation --start ISO --end ISO [--tenant SLUG] --json` (JSON for scripts).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.management.commands._billing_cli import dumps, parse_time
from billing.metering.usage import MeteringInputError
from infra.errors import PermanentError, TransientError
from scheduling.fleet_cli import Subcommand
from scheduling.fleetops import service
from tenants.models import Tenant


def _idle_args(parser: CommandParser) -> None:
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--tenant", default=None)
    parser.add_argument("--min-idle", type=int, default=None, dest="min_idle",
                        help="minutes (default: the fleet's or the tenant's setting, 60)")
    parser.add_argument("--json", action="store_true")


def _utilisation_args(parser: CommandParser) -> None:
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--tenant", default=None)
    parser.add_argument("--json", action="store_true")


def _run(command: BaseCommand, verb: str, opts: dict[str, Any]) -> None:
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
        command.stdout.write(dumps(rows))
        return
    for row in rows:
        if verb == "idle":
            hours = timedelta(seconds=row["idle_seconds"])
            command.stdout.write(f"{row['tenant']:<16} {row['namespace']}/{row['pod']:<30} {row['flavor']:<12} "
                              f"{row['start']} idle {hours} ({row['signal']}) {row['memory_mib']} MiB "
                              f"{row['cost']} {row['currency']}")
        else:
            command.stdout.write(f"{row['tenant']:<16} {row['flavor']:<12} allocated {row['allocated_seconds']} s "
                              f"active {row['active_seconds']} s efficiency {row['efficiency']}")


SUBCOMMANDS = {
    "idle": Subcommand("allocations idle for at least the minimum run, with their cost", _idle_args,
                       lambda command, o: _run(command, "idle", o)),
    "utilisation": Subcommand("allocated vs active GPU-seconds per tenant and flavor", _utilisation_args,
                              lambda command, o: _run(command, "utilisation", o)),
}
