"""Small template filters for the portal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template

from tenants.models import Phase

register = template.Library()


@register.filter
def problems(message: object) -> list[str]:
    """A condition message listing many problems joined with '; ' (as the reconciler writes validation
    failures), one per line. Two parts are more likely one sentence with a semicolon: kept whole."""
    if not isinstance(message, str):
        return []
    parts = [part.strip() for part in message.split("; ") if part.strip()]
    return parts if len(parts) >= 3 else [message]


@register.filter
def isotime(value: object) -> str:
    """An ISO-8601 timestamp (as stored in conditions) shown as `YYYY-MM-DD HH:MM:SS` UTC."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value  # show what is stored rather than hide it
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


# Condition reasons that mean "this feature is switched off here", not "this failed": shown neutral.
SWITCHED_OFF_REASONS = frozenset({"NotConfigured", "Disabled"})


@register.filter
def condition_state(condition: object) -> dict[str, str]:
    """How a tenant condition reads in the portal: {"tone": true|false|unknown|disabled, "label": ...}.
    A feature that is not configured (OpenBao off) is "disabled", not a red False."""
    if not isinstance(condition, dict):
        return {"tone": "unknown", "label": "Unknown"}
    if condition.get("reason") in SWITCHED_OFF_REASONS:
        return {"tone": "disabled", "label": "Disabled"}
    status = str(condition.get("status") or "Unknown")
    return {"tone": status.lower(), "label": status}


@register.filter
def sync_badge(tenant: object) -> dict[str, str] | None:
    """What the tenant list says after the phase: whether the latest change is live, only where that
    question makes sense. A requested tenant awaits approval; a deleted or rejected one has nothing to sync
    (no green "2 live" on a deleted tenant). Generation numbers go in the hover title."""
    phase = getattr(tenant, "phase", None)
    generation, observed = getattr(tenant, "generation", 0), getattr(tenant, "observed_generation", 0)
    if phase == Phase.REQUESTED:
        return {"tone": "neutral", "label": "awaiting approval", "title": "a platform admin reviews the request"}
    if phase in (Phase.DELETED, Phase.REJECTED):
        return None
    if observed >= generation:
        return {"tone": "good", "label": "in sync", "title": f"generation {generation} is live"}
    return {"tone": "waiting", "label": "syncing",
            "title": f"generation {generation} not live yet; {observed or 'nothing'} applied"}


@register.filter
def described(field: Any) -> str:
    """The field's widget, pointing (aria-describedby) at its own errors and help text, so a screen reader
    reads "must not be negative" with the field it concerns."""
    ids = []
    if field.errors:
        ids.append(f"{field.auto_id}_errors")
    if field.help_text:
        ids.append(f"{field.auto_id}_helptext")
    attrs = {"aria-describedby": " ".join(ids)} if ids else {}
    if field.errors:
        attrs["aria-invalid"] = "true"
    return field.as_widget(attrs=attrs)

