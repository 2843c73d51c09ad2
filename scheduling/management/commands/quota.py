"""gpufleet quota set SLUG --flavor NAME --nominal N [...] | list [SLUG] | settings SLUG [...] |
propose SLUG ... | requests | preview ID | approve ID | reject ID"""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions
from scheduling.forms import limit_or_keep
from scheduling.models import Quota, QuotaChangeRequest
from scheduling.quotas.preview import preview
from tenants.management.commands._util import get_tenant

from ._cli import run


def _numbers(parser: CommandParser) -> None:
    parser.add_argument("slug")
    parser.add_argument("--flavor", required=True)
    parser.add_argument("--nominal", required=True)
    parser.add_argument("--borrowing-limit", default="",
                        help="units it may borrow; 'none': no limit; not given: the current limit is kept "
                             "(no limit on a new quota)")
    parser.add_argument("--lending-limit", default="",
                        help="units it may lend; 'none': all unused nominal; not given: the current limit is kept "
                             "(no limit on a new quota)")
    parser.add_argument("--cluster", default=None, help="host cluster (default: the tenant's home cluster)")


class Command(GpufleetCommand):
    help = "Quotas per tenant and flavor (direct edits are audited like reviewed changes)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        _numbers(sub.add_parser("set", help="direct edit (platform admin)"))
        propose = sub.add_parser("propose", help="a change request for review")
        _numbers(propose)
        propose.add_argument("--reason", default="")
        sub.add_parser("list", help="quotas (of one tenant, or all)").add_argument("slug", nargs="?")
        settings = sub.add_parser("settings", help="cohort, fair-sharing weight, priority class of a tenant")
        settings.add_argument("slug")
        settings.add_argument("--cohort", default=None)
        settings.add_argument("--weight", default=None)
        settings.add_argument("--priority-class", default=None)
        sub.add_parser("requests", help="quota change requests and their review state")
        sub.add_parser("preview", help="what a quota request would change").add_argument("id", type=int)
        for verb in ("approve", "reject"):
            review = sub.add_parser(verb, help=f"{verb} a quota request (platform admin)")
            review.add_argument("id", type=int)
            review.add_argument("--comment", default="")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb in ("set", "propose"):
            tenant = get_tenant(str(o["slug"]))
            # A limit not given keeps the quota's current one, as the portal's form does (issue 27).
            numbers = {"flavor": o["flavor"], "nominal": o["nominal"],
                       "borrowing_limit": limit_or_keep(str(o["borrowing_limit"])),
                       "lending_limit": limit_or_keep(str(o["lending_limit"])), "cluster": o["cluster"]}
            if verb == "set":
                run(self, "quota set", lambda: quota_json(actions.set_quota(tenant, **numbers)))
            else:
                run(self, "quota propose", lambda: request_json(
                    actions.propose_quota_change(tenant, reason=o["reason"], **numbers)))
        elif verb == "list":
            rows = Quota.objects.select_related("tenant", "flavor", "cluster")
            if o.get("slug"):
                rows = rows.filter(tenant__slug=o["slug"])
            run(self, "quota list", lambda: [quota_json(q) for q in rows])
        elif verb == "settings":
            tenant = get_tenant(str(o["slug"]))
            run(self, "quota settings", lambda: _settings(actions.set_tenant_scheduling(
                tenant, cohort=o["cohort"], fair_sharing_weight=o["weight"], priority_class=o["priority_class"])))
        elif verb == "requests":
            rows = QuotaChangeRequest.objects.select_related("tenant", "flavor", "cluster")
            run(self, "quota requests", lambda: [request_json(r) for r in rows])
        else:
            change = QuotaChangeRequest.objects.select_related("tenant", "flavor").filter(pk=o["id"]).first()
            if change is None:
                raise CommandError(f"no quota request {o['id']}")
            if verb == "preview":
                result = preview(change)
                self.stdout.write(result["diff"] or "(no rendered object changes)\n", ending="")
                run(self, "quota preview", lambda: result["capacity"])
            elif verb == "approve":
                run(self, "quota approve", lambda: request_json(
                    actions.approve_quota_change(change, comment=o["comment"])))
            else:
                run(self, "quota reject", lambda: request_json(
                    actions.reject_quota_change(change, comment=o["comment"])))


def quota_json(quota: Quota) -> dict:
    return {"tenant": quota.tenant.slug, "cluster": quota.cluster.name, **quota.spec()}


def request_json(change: QuotaChangeRequest) -> dict:
    return {"id": change.pk, "tenant": change.tenant.slug, "cluster": change.cluster.name, **change.spec(),
            "state": change.state,
            "branch": change.branch, "reason": change.reason, "review_comment": change.review_comment}


def _settings(row) -> dict:  # type: ignore[no-untyped-def]
    return {"tenant": row.tenant.slug, **actions._settings_snapshot(row)}
