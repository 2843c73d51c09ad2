"""gpufleet endpoint create SLUG NAME --model MODEL --tier TIER [--deployment D] | list [SLUG] | delete SLUG NAME"""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions, defaults
from scheduling.models import InferenceEndpoint, SlaTier
from tenants.management.commands._util import get_tenant

from ._cli import run


class Command(GpufleetCommand):
    help = "Scale-to-zero inference endpoints (KEDA ScaledObjects on vLLM queue depth and KV cache)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="an inference endpoint of a tenant, scaled by its tier")
        create.add_argument("slug")
        create.add_argument("name")
        create.add_argument("--model", required=True, help="served model name (vLLM model_name label)")
        create.add_argument("--tier", required=True, help="critical, standard or batch (or a custom tier)")
        create.add_argument("--deployment", default=None, help="Deployment to scale (default: NAME)")
        create.add_argument("--queue-target", default=None)
        create.add_argument("--kv-cache-target", default=None, help="0-1 fraction (default 0.8)")
        create.add_argument("--trigger-metric", action="append", default=None)
        create.add_argument("--gated", action="store_true",
                            help="a gated Hugging Face model: needs the tenant's token in OpenBao")
        sub.add_parser("list", help="endpoints (of one tenant, or all)").add_argument("slug", nargs="?")
        tier = sub.add_parser("tier", help="create or change an SLA tier (platform admin)")
        tier.add_argument("tier_name")
        for option in ("min-replicas", "max-replicas", "cooldown-seconds", "polling-seconds", "prewarm-start",
                       "prewarm-end", "prewarm-replicas", "description"):
            tier.add_argument(f"--{option}", default=None)
        sub.add_parser("tiers", help="the SLA tiers and their scaling settings")
        delete = sub.add_parser("delete", help="remove an endpoint")
        delete.add_argument("slug")
        delete.add_argument("name")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb == "list":
            rows = InferenceEndpoint.objects.select_related("tenant", "tier")
            if o.get("slug"):
                rows = rows.filter(tenant__slug=o["slug"])
            run(self, "endpoint list", lambda: [endpoint_json(e) for e in rows])
            return
        if verb == "tiers":
            defaults.ensure_rows()
            run(self, "endpoint tiers", lambda: [actions.tier_snapshot(t) for t in SlaTier.objects.all()])
            return
        if verb == "tier":
            fields = {k: o[k] for k in ("min_replicas", "max_replicas", "cooldown_seconds", "polling_seconds",
                                        "prewarm_start", "prewarm_end", "prewarm_replicas", "description")}
            run(self, "endpoint tier", lambda: actions.tier_snapshot(actions.set_sla_tier(o["tier_name"], **fields)))
            return
        tenant = get_tenant(str(o["slug"]))
        if verb == "create":
            run(self, "endpoint create", lambda: endpoint_json(actions.create_endpoint(
                tenant, o["name"], model=o["model"], tier=o["tier"], deployment=o["deployment"],
                queue_target=o["queue_target"], kv_cache_target=o["kv_cache_target"], triggers=o["trigger_metric"],
                gated=bool(o["gated"]))))
            return
        endpoint = InferenceEndpoint.objects.filter(tenant=tenant, name=o["name"]).first()
        if endpoint is None:
            raise CommandError(f"no endpoint {o['name']!r} in tenant {tenant.slug!r}")
        run(self, "endpoint delete", lambda: actions.delete_endpoint(endpoint))


def endpoint_json(endpoint: InferenceEndpoint) -> dict:
    return {"tenant": endpoint.tenant.slug, **actions.endpoint_snapshot(endpoint)}
