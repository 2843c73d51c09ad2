"""gpufleet kubeconfig --tenant SLUG: a kubeconfig for the tenant's virtual cluster (kubelogin, no secrets)."""

from __future__ import annotations

from django.core.management.base import CommandParser

from gpufleet.command import GpufleetCommand
from gpufleet.core.errors import ActionError
from tenants.isolation.kubeconfig import kubeconfig_yaml

from ._util import action_error, get_tenant


class Command(GpufleetCommand):
    help = "Print a kubeconfig for a tenant's virtual cluster (OIDC via kubelogin; contains no secrets)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", metavar="SLUG", required=True)

    def handle(self, *args: object, **opts: object) -> None:
        try:
            text = kubeconfig_yaml(get_tenant(str(opts["tenant"])))
        except ActionError as exc:
            raise action_error(exc) from exc
        self.stdout.write(text, ending="")
