"""record(): write one AuditEvent for the current actor. Called by actions inside their transaction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models

from .context import current_actor
from .models import AuditEvent


def record(
    action: str,
    obj: models.Model,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    tenant_slug: str = "",
) -> AuditEvent:
    event = _event(action, obj, before=before, after=after, tenant_slug=tenant_slug)
    event.save()
    return event


def record_many(events: Iterable[tuple[str, models.Model, dict[str, Any]]]) -> list[AuditEvent]:
    """One AuditEvent per (action, object, {before, after, tenant_slug}), written in one INSERT: for
    actions that change many objects at once (drafting every tenant's invoice)."""
    return AuditEvent.objects.bulk_create([_event(action, obj, **extra) for action, obj, extra in events],
                                          batch_size=500)


def _event(
    action: str,
    obj: models.Model,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    tenant_slug: str = "",
) -> AuditEvent:
    actor = current_actor()
    return AuditEvent(
        actor_user_id=actor.user_id,
        actor_token_id=actor.token_id,
        actor_task=actor.task,
        actor_label=actor.label,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        object_repr=str(obj)[:200],
        tenant_slug=tenant_slug,
        before=before,
        after=after,
        request_id=actor.request_id,
        task_id=actor.task_id,
    )
