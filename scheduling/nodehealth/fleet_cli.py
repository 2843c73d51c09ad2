"""`gpufleet fleet health | uncordon | health-rules | health-policy` (registered by scheduling.fleet_cli).

`gpufleet fleet health [--at ISO] --json` prints one object per GPU node: `node`, `state`, `reasons` (list),
`action` (what remediation would do now, given the limits), plus `flavor`, `dry_run` and `evidence`.
`--remediate` also carries the plan out (cordon/drain/replace; in dry-run only records it).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.management.commands._billing_cli import parse_time
from gpufleet.audit.context import acting
from gpufleet.core.errors import ActionError
from infra.errors import PermanentError, TransientError
from scheduling.fleet_cli import Subcommand
from tenants.management.commands._util import action_error, dumps

from . import actions, kube
from .models import HealthRule, RemediationPolicy
from .remediation import assess, remediate, uncordon


def _health_args(parser: CommandParser) -> None:
    parser.add_argument("--at", help="ISO 8601 instant to assess (default: now)")
    parser.add_argument("--json", action="store_true", help="one JSON object per node")
    parser.add_argument("--remediate", action="store_true",
                        help="carry the plan out (cordon, evict, delete NodeClaims; dry-run only records)")


def _health(command: BaseCommand, o: dict[str, Any]) -> None:
    at = parse_time(o["at"], "at") if o.get("at") else None
    try:
        with acting(task="cli:fleet health"):
            assessment = assess(at, ops=kube.cluster_ops(), metrics=kube.metrics_client())
            if o.get("remediate"):
                remediate(assessment, kube.cluster_ops())
    except (TransientError, PermanentError) as exc:
        raise CommandError(str(exc)) from exc
    report = assessment.report()
    if o.get("json"):
        command.stdout.write(dumps(report))
        return
    width = max([len(r["node"]) for r in report] + [4])
    lines = [f"{'NODE':<{width}}  {'STATE':<8}  ACTION"]
    for row in report:
        lines.append(f"{row['node']:<{width}}  {row['state']:<8}  {row['action']}")
        lines += [f"{'':<{width}}    - {reason}" for reason in row["reasons"]]
    command.stdout.write("\n".join(lines))


def _uncordon_args(parser: CommandParser) -> None:
    parser.add_argument("node")
    parser.add_argument("--note", default="", help="why (kept in the audit trail)")


def _uncordon(command: BaseCommand, o: dict[str, Any]) -> None:
    try:
        with acting(task="cli:fleet uncordon"):
            rem = uncordon(o["node"], kube.cluster_ops(), note=str(o.get("note") or ""))
    except LookupError as exc:
        raise CommandError(str(exc)) from exc
    except (TransientError, PermanentError) as exc:
        raise CommandError(str(exc)) from exc
    command.stdout.write(dumps({"node": rem.node, "remediation": rem.pk, "closed_because": rem.closed_because}))


def _rules_args(parser: CommandParser) -> None:
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("list", help="the classification table")
    change = sub.add_parser("set", help="add or change a rule (signal, match, state identify it)")
    change.add_argument("--signal", required=True)
    change.add_argument("--match", default="")
    change.add_argument("--state", required=True)
    change.add_argument("--threshold", required=True)
    change.add_argument("--description", default=None)
    change.add_argument("--disable", action="store_true")


def _rules(command: BaseCommand, o: dict[str, Any]) -> None:
    if o["verb"] == "set":
        try:
            with acting(task="cli:fleet health-rules set"):
                actions.set_rule(signal=o["signal"], match=o["match"], state=o["state"], threshold=o["threshold"],
                                 description=o["description"], enabled=not o["disable"])
        except ActionError as exc:
            raise action_error(exc) from exc
    command.stdout.write(dumps([actions.rule_json(r) for r in HealthRule.objects.all()]))


def _policy_args(parser: CommandParser) -> None:
    parser.add_argument("--dry-run", choices=["on", "off"], default=None)
    parser.add_argument("--max-nodes", default=None)
    parser.add_argument("--max-percent", default=None)
    parser.add_argument("--window-minutes", default=None)


def _policy(command: BaseCommand, o: dict[str, Any]) -> None:
    dry = None if o["dry_run"] is None else o["dry_run"] == "on"
    try:
        with acting(task="cli:fleet health-policy"):
            policy = actions.set_policy(dry_run=dry, max_nodes=o["max_nodes"], max_percent=o["max_percent"],
                                        window_minutes=o["window_minutes"])
    except ActionError as exc:
        raise action_error(exc) from exc
    command.stdout.write(dumps(actions.policy_json(policy or RemediationPolicy.current())))


SUBCOMMANDS = {
    "health": Subcommand("GPU node health: state, reasons and what remediation would do now", _health_args,
                         _health),
    "uncordon": Subcommand("make a node schedulable again (a person's explicit action; closes its remediation)",
                           _uncordon_args, _uncordon),
    "health-rules": Subcommand("the node-health classification table (list, set)", _rules_args, _rules),
    "health-policy": Subcommand("remediation limits: dry-run, max nodes, max percent of a flavor, window",
                                _policy_args, _policy),
}
