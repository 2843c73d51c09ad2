"""Shared bits of the scheduling CLI: run a verb as the CLI actor and turn ActionErrors into exits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from gpufleet.audit.context import acting
from gpufleet.core.errors import ActionError
from tenants.management.commands._util import action_error, dumps


def run(command: BaseCommand, name: str, fn: Callable[[], Any]) -> None:
    with acting(task=f"cli:{name}"):
        try:
            result = fn()
        except ActionError as exc:
            raise action_error(exc) from exc
    if result is not None:
        command.stdout.write(dumps(result))


def parse_pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{option}: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out
