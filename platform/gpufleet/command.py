"""The base of gpufleet's management commands: help that lists gpufleet's options, not Django's.

Django gives every command --version, --verbosity, --settings, --pythonpath, --traceback, --no-color,
--force-color and --skip-checks. They still work (scripts may pass them), but `gpufleet <command> --help`
no longer lists them before the command's own options. A mistyped option gets the nearest real one
("--flavour" -> "did you mean --flavor?") at any depth of subcommands.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

DJANGO_OPTIONS = frozenset({"--version", "-v", "--verbosity", "--settings", "--pythonpath", "--traceback",
                            "--no-color", "--force-color", "--skip-checks"})

# Help for the options many commands share, by argparse `dest`, where a command gave none: one wording per
# option across commands ("{noun}" is the command's noun: "gpu model", "node pool", "workload"...). An option
# whose meaning is the command's own carries its own help where it is declared.
SHARED_HELP = {
    "slug": "the tenant's slug (lowercase letters, digits and '-')",
    "tenant": "the tenant's slug",
    "name": "the {noun}'s name",
    "id": "the quota change request's id (gpufleet quota list SLUG shows it)",
    "number": "the invoice number (e.g. GF-2026-11-0001)",
    "json": "print JSON for scripts instead of a table",
    "flavor": "the GPU flavor's name (gpufleet flavor create; the portal's flavors page lists them)",
    "start": "start of the window, ISO 8601 UTC (e.g. 2026-11-01T00:00:00Z); included",
    "end": "end of the window, ISO 8601 UTC; excluded",
    "period": "the billing month, YYYY-MM",
    "reason": "why, for the audit log and the requester",
    "comment": "a note for the requester and the audit log",
    "seed": "random seed: the same seed gives the same result",
    "days": "how many days to simulate",
    "nominal": "guaranteed units of the flavor (Kueue nominalQuota)",
    "display_name": "a human-readable name shown in the portal",
    "description": "what it is for, shown to people",
    "currency": "ISO 4217 code; the fleet bills in GPUFLEET_BILLING_CURRENCY",
    "overcommit_factor": "how much nominal quota may be sold per schedulable unit (1 = none)",
    "trust_level": "untrusted (whole GPUs), standard (+ MIG) or trusted (+ HAMi shares)",
    "weight": "fair-sharing weight against the cohort's other queues",
    "priority_class": "the Kubernetes PriorityClass of the tenant's workloads",
    "cohort": "the Kueue cohort whose unused quota the tenant may borrow",
    "parent": "the parent cohort's name",
    "capacity": "installed units of the flavor (GPUs, MIG instances or shares)",
    "mode": "whole, mig or hami",
    "gpu_model": "the GPU model's name (gpufleet gpu-model create)",
    "mig_profile": "the MIG profile, e.g. 3g.40gb (mode mig)",
    "memory_percent": "the share of GPU memory per unit (mode hami)",
    "cores_percent": "the share of GPU cores per unit (mode hami)",
    "memory_mib": "the GPU's memory in MiB as DCGM reports it",
    "node_label": "a node label key=value that selects the flavor's nodes",
    "gpu_limit": "the most GPUs the pool may grow to (Karpenter limits)",
    "instance_type": "the cloud instance type(s) of the pool's nodes",
    "capacity_type": "on-demand or spot",
    "node_class": "the Karpenter NodeClass the pool's nodes use",
    "consolidation_policy": "Karpenter's consolidation policy (WhenEmpty keeps running jobs)",
    "consolidate_after": "how long a node stays empty before it is removed (e.g. 1h)",
    "endpoint": "the inference endpoint as TENANT-SLUG/NAME",
    "traffic": "a CSV of hour,rps, one row per hour from the start (default: simulated traffic)",
    "gpus_per_replica": "GPUs one replica holds",
    "rps_per_replica": "requests per second one replica serves",
    "all": "every tenant",
    "platform": "the cluster-wide objects (flavors, cohorts, node pools, policies)",
    "format": "csv, json or focus (FinOps FOCUS columns)",
    "out": "the file to write (default: standard output)",
    "context": "the kubeconfig context to check (default: the current one)",
    "node": "the node's name",
    "per_unit_hour": "the price of one unit for one hour, in --currency",
    "effective_from": "the first day the price applies, YYYY-MM-DD",
    "tier_name": "the SLA tier's name",
    "min_replicas": "the fewest replicas (0 = scale to zero)",
    "max_replicas": "the most replicas",
    "queue_target": "the queue depth per replica that adds one",
    "polling_seconds": "how often KEDA reads the trigger metric",
    "cooldown_seconds": "how long the load stays low before scaling in",
    "trigger_metric": "the vLLM metric that drives scaling",
    "prewarm_start": "business hours start (HH:MM UTC): replicas warm before it",
    "prewarm_end": "business hours end (HH:MM UTC)",
    "prewarm_replicas": "replicas kept warm in business hours",
    "threshold": "the value at which the rule fires",
    "signal": "the DCGM health field the rule reads",
    "state": "the node state the rule sets (e.g. degraded, failed)",
    "match": "which values of the signal the rule matches (empty: any)",
    "disable": "turn the rule off",
    "window_minutes": "the window the policy counts remediations in",
    "max_nodes": "the most nodes remediated at once",
    "max_percent": "the most of a flavor's nodes remediated at once, in percent",
    "dry_run": "show what would happen; change nothing",
    "finalize": "finalize the drafts (numbered, immutable; asks for confirmation unless --yes)",
    "addrport": "address and port to listen on (default 127.0.0.1:8000)",
}


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """`parser` and every subcommand's parser below it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from parsers(sub)


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for p in parsers(parser) for a in p._actions for s in a.option_strings if s.startswith("--")}


def suggestion(words: list[str], known: set[str]) -> str:
    """For the first unknown --option in `words` close to a known one:
    ' (--flavour is not an option here: did you mean --flavor?)'."""
    for word in words:
        name = word.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.7)
            if close:
                return f" ({name} is not an option here: did you mean {close[0]}?)"
    return ""


class GpufleetCommand(BaseCommand):
    """Subclass this instead of BaseCommand for a gpufleet command."""

    _argv: list[str] = []

    def run_from_argv(self, argv: list[str]) -> None:
        self._argv = list(argv[2:])
        super().run_from_argv(argv)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        for action in parser._actions:
            if DJANGO_OPTIONS.intersection(action.option_strings):
                action.help = argparse.SUPPRESS
        known = option_strings(parser)
        noun = subcommand.replace("-", " ").replace("nodepool", "node pool")
        for each in parsers(parser):
            self._suggest_on_error(each, known)
            for action in each._actions:
                if not action.help and action.dest in SHARED_HELP:
                    action.help = SHARED_HELP[action.dest].format(noun=noun)
        return parser

    def confirm(self, question: str, *, yes: bool, flag: str = "--yes") -> None:
        """Go on when `yes`, or when a person at a terminal answers y; refuse otherwise (a script that did
        not pass `flag` gets a CommandError saying so, never a silent change it cannot take back)."""
        if yes:
            return
        if not self.stdin_is_terminal():
            raise CommandError(f"{question} Pass {flag} to confirm.")
        self.stderr.write(f"{question} [y/N] ", ending="")
        self.stderr.flush()
        if input().strip().lower() not in {"y", "yes"}:
            raise CommandError("not confirmed; nothing was changed")

    @staticmethod
    def stdin_is_terminal() -> bool:
        return sys.stdin is not None and sys.stdin.isatty()

    def _suggest_on_error(self, parser: argparse.ArgumentParser, known: set[str]) -> None:
        plain = parser.error

        def error(message: str) -> Any:
            return plain(message + suggestion(self._argv, known))

        parser.error = error  # type: ignore[method-assign]
