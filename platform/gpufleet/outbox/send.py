"""Record work in the caller's transaction; hand it to the broker after commit or later (relay)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from gpufleet import clock

from .models import OutboxMessage

log = logging.getLogger(__name__)

# The relay leaves fresh rows to the after-commit send of the request that wrote them.
RELAY_MIN_AGE = timedelta(seconds=5)
RELAY_BATCH = 500


def _publish(task: str, args: list[Any]) -> None:
    from gpufleet.celery import app

    if task not in app.tasks:  # a web process has not imported every tasks module: autodiscover them once
        app.loader.import_default_modules()
    # apply_async on the registered task (not send_task) so the demo's eager mode runs it inline.
    app.tasks[task].apply_async(args=args)


def _send(message_id: int, task: str, args: list[Any]) -> bool:
    """Publish one message; on success forget it. Any failure leaves the row for the relay."""
    try:
        _publish(task, args)
    except Exception as exc:  # broker down, DNS, timeout...: the row is the promise that it will run
        log.warning("outbox: %s%s kept for the relay (broker: %s)", task, tuple(args), exc)
        OutboxMessage.objects.filter(pk=message_id).update(attempts=F("attempts") + 1, last_error=str(exc)[:2000])
        return False
    OutboxMessage.objects.filter(pk=message_id).delete()
    return True


def enqueue(task: str, *args: Any) -> OutboxMessage:
    """Run `task(*args)` on a worker once the current transaction commits -- even if the broker is down now."""
    message = OutboxMessage.objects.create(created=clock.now(), task=task, args=list(args))
    message_id = message.pk

    def after_commit() -> None:
        try:
            _send(message_id, task, list(args))
        except Exception:  # the database went away after commit: the row (if any) waits for the relay
            log.exception("outbox: could not record the send of %s%s", task, tuple(args))

    transaction.on_commit(after_commit)
    return message


def relay(limit: int = RELAY_BATCH, min_age: timedelta = RELAY_MIN_AGE) -> int:
    """Send what the broker missed. Stops at the first failure (the broker is still down). Returns sent."""
    cutoff = clock.now() - min_age
    sent = 0
    with transaction.atomic():
        # skip_locked: two relays (beat and a starting worker) never send the same rows at once.
        rows = list(
            OutboxMessage.objects.select_for_update(skip_locked=True).filter(created__lte=cutoff)[:limit]
        )
        for row in rows:
            try:
                _publish(row.task, list(row.args))
            except KeyError:
                # A task this code does not know (renamed or removed): it can never be sent. Keep the row
                # visible (admin, attempts, last_error) but do not let it hold up the ones behind it.
                row.attempts += 1
                row.last_error = f"no task named {row.task!r} is registered"
                row.save(update_fields=["attempts", "last_error"])
                log.error("outbox relay: %s", row.last_error)
                continue
            except Exception as exc:
                row.attempts += 1
                row.last_error = str(exc)[:2000]
                row.save(update_fields=["attempts", "last_error"])
                log.warning("outbox relay: broker still unavailable (%s); %d message(s) wait", exc, len(rows) - sent)
                break
            row.delete()
            sent += 1
    if sent:
        log.info("outbox relay: sent %d message(s)", sent)
    return sent


def pending() -> int:
    return OutboxMessage.objects.count()
