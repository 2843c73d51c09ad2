"""gpufleet workload why --tenant SLUG NAME | list --tenant SLUG: why is my workload pending?"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from infra.errors import PermanentError, TransientError
from scheduling.pending import sources as pending_sources
from tenants.management.commands._util import dumps, get_tenant


class Command(GpufleetCommand):
    help = "Why is a workload pending: one sentence with the evidence and the next step."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        why = sub.add_parser("why", help="explain one workload (Workload, Job, pod or PodGroup name)")
        why.add_argument("--tenant", required=True)
        why.add_argument("name")
        why.add_argument("--json", action="store_true")
        listing = sub.add_parser("list", help="every workload of the tenant with its explanation")
        listing.add_argument("--tenant", required=True)
        listing.add_argument("--json", action="store_true")

    def handle(self, *args: Any, verb: str, **o: Any) -> None:
        tenant = get_tenant(o["tenant"])
        sources = pending_sources.Sources(pending_sources.cluster_ops())
        try:
            if verb == "why":
                try:
                    found = [sources.explain(tenant, o["name"])]
                except LookupError as exc:
                    raise CommandError(str(exc)) from exc
            else:
                found = sources.explain_all(tenant)
        except (TransientError, PermanentError) as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            data = [e.as_dict() for e in found]
            self.stdout.write(dumps(data[0] if verb == "why" else data))
            return
        for e in found:
            self.stdout.write(f"{e.workload}: {e.sentence}\n  next: {e.next_step}")
            for ev in e.evidence:
                self.stdout.write(f"  evidence: {ev.get('source')} {ev.get('field')} = {ev.get('value')}"
                                  + (f" ({ev['message']})" if ev.get("message") else ""))
