"""gpufleet tenant create|approve|reject|update|suspend|resume|delete|list|show"""

from __future__ import annotations

from django.core.management.base import CommandParser

from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from gpufleet.core.errors import ActionError
from tenants import actions
from tenants.models import Tenant, TrustLevel

from ._util import action_error, dumps, get_tenant, tenant_json, tenant_table


class Command(GpufleetCommand):
    help = "Manage tenants (every change is audited as the CLI user)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="request a tenant (and optionally approve it)")
        create.add_argument("slug")
        create.add_argument("--trust-level", required=True, help=f"one of {', '.join(TrustLevel.values)}")
        create.add_argument("--display-name", default=None)
        create.add_argument("--approve", action="store_true", help="approve at once (platform admin)")
        for verb, text in (("approve", "approve a requested tenant (platform admin)"),
                           ("suspend", "suspend a tenant"),
                           ("resume", "resume a suspended tenant"), ("delete", "delete a tenant"),
                           ("show", "one tenant as JSON")):
            sub.add_parser(verb, help=text).add_argument("slug")
        reject = sub.add_parser("reject", help="reject a requested tenant")
        reject.add_argument("slug")
        reject.add_argument("--reason", default="")
        update = sub.add_parser("update", help="change a tenant's display name or trust level")
        update.add_argument("slug")
        update.add_argument("--trust-level", default=None)
        update.add_argument("--display-name", default=None)
        listing = sub.add_parser("list", help="all tenants as a table (--json for scripts)")
        listing.add_argument("--json", action="store_true", help="print JSON, one object per tenant")

    def handle(self, *args: object, verb: str, **opts: object) -> None:
        with acting(task=f"cli:tenant {verb}"):
            try:
                self._dispatch(verb, opts)
            except ActionError as exc:
                raise action_error(exc) from exc

    def _dispatch(self, verb: str, opts: dict) -> None:
        if verb == "list":
            tenants = Tenant.objects.order_by("slug")
            if opts["json"]:
                self.stdout.write(dumps([tenant_json(t) for t in tenants]))
            else:
                self.stdout.write(tenant_table(tenants))
            return
        if verb == "create":
            tenant = actions.request_tenant(opts["slug"], opts["trust_level"], opts["display_name"])
            if opts["approve"]:
                tenant = actions.approve(tenant)
            self.stdout.write(dumps(tenant_json(tenant)))
            return
        tenant = get_tenant(opts["slug"])
        if verb == "approve":
            tenant = actions.approve(tenant)
        elif verb == "reject":
            tenant = actions.reject(tenant, opts["reason"])
        elif verb == "update":
            tenant = actions.update(tenant, display_name=opts["display_name"], trust_level=opts["trust_level"])
        elif verb == "suspend":
            tenant = actions.suspend(tenant)
        elif verb == "resume":
            tenant = actions.resume(tenant)
        elif verb == "delete":
            tenant = actions.delete(tenant)
        self.stdout.write(dumps(tenant_json(tenant)))
