"""gpufleet fleet <subcommand>: fleet operations (node health, utilisation, idle GPUs, ...).

A small dispatcher so several apps add subcommands without touching one file: every installed app may
have a `fleet_cli` module with `SUBCOMMANDS = {name: Subcommand}` (see `scheduling.fleet_cli`); they are
found at start-up and registered in app order. Two apps claiming one name is an error at start-up.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling.fleet_cli import discover


class Command(GpufleetCommand):
    help = "Fleet operations: node health and remediation, utilisation and idle GPUs."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True)
        for name, subcommand in discover().items():
            subcommand.add_arguments(sub.add_parser(name, help=subcommand.help, description=subcommand.help))

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        found = discover().get(subcommand)
        if found is None:  # argparse refuses unknown names first; kept for call_command()
            raise CommandError(f"unknown fleet subcommand {subcommand!r}")
        found.handle(self, options)
