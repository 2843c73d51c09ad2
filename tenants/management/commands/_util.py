"""Shared bits for the CLI: JSON output and turning action errors into clean exits."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from tenants.errors import ActionError
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


def get_tenant(slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        raise CommandError(f"no tenant with slug {slug!r}")
    return tenant


def action_error(exc: ActionError) -> CommandError:
    lines = [f"{field or 'request'}: {reason}" for field, reasons in exc.errors.items() for reason in reasons]
    return CommandError("\n".join(lines))
