"""`gpufleet fleet idle | utilisation` (registered by scheduling.fleet_cli): fleet operations from the TSDB.

`gpufleet fleet idle --start ISO --end ISO [--tenant SLUG] [--min-idle MINUTES] --json` and
`gpufleet fleet utilisation --start ISO --end ISO [--tenant SLUG] --json` (JSON for scripts), and
`gpufleet fleet rollup --start ISO --end ISO [--force] [--json]` (backfill of the hourly roll-ups).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.management.commands._billing_cli import dumps, parse_time
from billing.metering.usage import MeteringInputError
from gpufleet import clock
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


@contextmanager
def _as_command_errors() -> Iterator[None]:
    """Bad input and TSDB failures as command errors (the message names the option where there is one)."""
    try:
        yield
    except MeteringInputError as exc:
        raise CommandError(f"--{exc.field}: {exc.reason}") from exc
    except (TransientError, PermanentError) as exc:
        raise CommandError(str(exc)) from exc


def _run(command: BaseCommand, verb: str, opts: dict[str, Any]) -> None:
    start, end = parse_time(str(opts["start"]), "start"), parse_time(str(opts["end"]), "end")
    if end <= start:
        raise CommandError("--end: must be after --start")
    tenant = opts.get("tenant")
    if tenant is not None and not Tenant.objects.filter(slug=tenant).exists():
        raise CommandError(f"--tenant: no tenant with slug {tenant!r}")
    tenants = [str(tenant)] if tenant else None
    with _as_command_errors():
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


def _rollup_args(parser: CommandParser) -> None:
    parser.add_argument("--start", required=True, help="a whole hour (UTC)")
    parser.add_argument("--end", required=True, help="a whole hour; hours not settled yet are left out")
    parser.add_argument("--force", action="store_true", help="recompute hours that already have a final roll-up")
    parser.add_argument("--json", action="store_true")


def _rollup(command: BaseCommand, opts: dict[str, Any]) -> None:
    """Backfill: roll up the settled hours of a window (what the hourly task does for recent hours)."""
    start, end = parse_time(str(opts["start"]), "start"), parse_time(str(opts["end"]), "end")
    if end <= start:
        raise CommandError("--end: must be after --start")
    with _as_command_errors():
        done = service.rollup_window(start, end, now=clock.now(), force=bool(opts.get("force")))
    if opts.get("json"):
        command.stdout.write(dumps(done))
        return
    command.stdout.write(f"rolled up {done['util']} utilisation hours and {done['idle']} idle hours")


SUBCOMMANDS = {
    "idle": Subcommand("allocations idle for at least the minimum run, with their cost", _idle_args,
                       lambda command, o: _run(command, "idle", o)),
    "utilisation": Subcommand("allocated vs active GPU-seconds per tenant and flavor", _utilisation_args,
                              lambda command, o: _run(command, "utilisation", o)),
    "rollup": Subcommand("roll up settled hours of idle slots and utilisation into the TSDB (backfill)",
                         _rollup_args, _rollup),
}
