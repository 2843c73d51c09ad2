"""Small template filters for the portal."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

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
