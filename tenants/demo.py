"""Seeders for `gpufleet demo`. Apps register a function that adds their part of the demo fleet.

Each seeder gets the demo users and tenants by name and must be idempotent: `gpufleet demo` runs at
every `make demo`, and running it again changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Seeder = Callable[[dict[str, Any], dict[str, Any]], None]
SEEDERS: list[Seeder] = []


def seeder(fn: Seeder) -> Seeder:
    if fn not in SEEDERS:
        SEEDERS.append(fn)
    return fn
