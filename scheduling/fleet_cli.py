"""The `gpufleet fleet` subcommand registry (scheduling/management/commands/fleet.py dispatches).

An app adds subcommands with a module `<app>.fleet_cli` defining `SUBCOMMANDS: dict[str, Subcommand]`;
nothing else to edit, so branches that add fleet subcommands merge without touching a shared file.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandParser


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[CommandParser], None]
    handle: Callable[[BaseCommand, dict[str, Any]], None]


def discover() -> dict[str, Subcommand]:
    found: dict[str, Subcommand] = {}
    owners: dict[str, str] = {}
    for config in apps.get_app_configs():
        module_name = f"{config.name}.fleet_cli"
        if config.name == "scheduling" or importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        for name, subcommand in getattr(module, "SUBCOMMANDS", {}).items():
            if name in found:
                raise RuntimeError(f"fleet subcommand {name!r} is defined by both {owners[name]} and {module_name}")
            found[name], owners[name] = subcommand, module_name
    return dict(sorted(found.items()))
