"""Shared bits for the CLI: JSON output and turning action errors into clean exits."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.management.base import CommandError

from gpufleet.core.errors import ActionError
from tenants.models import Tenant


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, default=str)


def tenant_json(tenant: Tenant) -> dict[str, Any]:
    tenant.refresh_from_db()
    return {
        "id": tenant.pk,
        "slug": tenant.slug,
        "display_name": tenant.display_name,
        "trust_level": tenant.trust_level,
        "phase": tenant.phase,
        "generation": tenant.generation,
        "observed_generation": tenant.observed_generation,
        "namespace": tenant.namespace,
        "conditions": tenant.conditions,
    }


def tenant_table(tenants: Iterable[Tenant]) -> str:
    """A table a person reads: slug, phase, trust level, how far reconciliation got, display name."""
    rows = [("SLUG", "PHASE", "TRUST", "SYNCED", "NAME")]
    for t in tenants:
        synced = "yes" if t.observed_generation == t.generation else f"{t.observed_generation} of {t.generation}"
        rows.append((t.slug, t.phase, t.trust_level, synced, t.display_name))
    if len(rows) == 1:
        return "no tenants (create one: gpufleet tenant create <slug> --trust-level standard)"
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(f"{cell!s:<{w}}" for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
                     for row in rows)


def get_tenant(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"no tenant with slug {slug!r}")
    return tenant


def action_error(exc: ActionError) -> CommandError:
    lines = [f"{field or 'request'}: {reason}" for field, reasons in exc.errors.items() for reason in reasons]
    return CommandError("\n".join(lines))
