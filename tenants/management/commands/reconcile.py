"""gpufleet reconcile (--tenant SLUG | --all): run the reconcile now, in this process."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from infra.errors import InfraError
from tenants import reconcile
from tenants.models import Tenant

from ._util import get_tenant


class Command(GpufleetCommand):
    help = "Reconcile one tenant or all of them (and the platform objects) synchronously."

    def add_arguments(self, parser: CommandParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--tenant", metavar="SLUG")
        group.add_argument("--all", action="store_true")

    def handle(self, *args: object, **opts: object) -> None:
        failed = False
        with acting(task="cli:reconcile"):
            try:
                if opts["all"]:
                    result = reconcile.reconcile_platform()
                    self.stdout.write(f"platform: {result.summary()}")
                    tenants = list(Tenant.objects.live().order_by("slug"))
                else:
                    tenants = [get_tenant(str(opts["tenant"]))]
                for tenant in tenants:
                    outcome = reconcile.reconcile_tenant(tenant.pk)
                    failed |= bool(outcome.problems)
                    self.stdout.write(outcome.summary)
            except InfraError as exc:
                raise CommandError(str(exc)) from exc
        if failed:
            raise CommandError("some tenants failed to reconcile (see their conditions)")
