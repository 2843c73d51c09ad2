"""Fleet sync runs: when gpufleet last re-applied everything, what it found, what drift it repaired."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import models

from gpufleet import clock


class SyncRun(models.Model):
    """One run of `scheduling.sync_fleet` (the latest one is the fleet's sync status)."""

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        OK = "ok", "OK"
        # Some owners could not be applied; the others were (one broken tenant never blocks the fleet).
        PARTIAL = "partial", "Finished with errors"
        FAILED = "failed", "Failed"

    started = models.DateTimeField(db_index=True)
    finished = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    backend = models.CharField(max_length=20, blank=True)
    owners = models.PositiveIntegerField(default=0, help_text="platform plus live tenants applied")
    objects_checked = models.PositiveIntegerField(default=0)
    objects_changed = models.PositiveIntegerField(default=0)
    drift_count = models.PositiveIntegerField(default=0)
    # Repo paths (or object keys) repaired, capped so one bad day cannot bloat a row.
    drifted = models.JSONField(default=list, blank=True)
    errors = models.JSONField(default=list, blank=True)
    # The GitOps repository's condition after the pass (infra.gitops.health) and the push sidecar's
    # last result: {"status", "reason", "message", "head", "push": {...}}; {} for other backends.
    # Nullable: the previous release's pods insert runs without it during an upgrade (expand/contract).
    repository = models.JSONField(default=dict, blank=True, null=True)

    class Meta:
        ordering = ["-started", "-id"]
        get_latest_by = "started"

    def __str__(self) -> str:
        return f"sync {self.started:%Y-%m-%d %H:%M:%S} {self.state}"

    @property
    def duration_seconds(self) -> float | None:
        if self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    @property
    def push(self) -> dict[str, Any]:
        """The push sidecar's last round as the worker saw it at the end of this run ({} without push)."""
        return dict((self.repository or {}).get("push") or {})

    @property
    def last_push_at(self) -> datetime | None:
        epoch = self.push.get("last_success_epoch")
        return datetime.fromtimestamp(int(epoch), UTC) if epoch else None

    @property
    def last_push_age_seconds(self) -> float | None:
        """Seconds since the last successful push, now (a publish that stopped grows this)."""
        at = self.last_push_at
        return None if at is None else max(0.0, (clock.now() - at).total_seconds())

    def as_status(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "started": self.started.isoformat(),
            "finished": self.finished.isoformat() if self.finished else None,
            "state": self.state,
            "backend": self.backend,
            "duration_seconds": self.duration_seconds,
            "owners": self.owners,
            "objects_checked": self.objects_checked,
            "objects_changed": self.objects_changed,
            "drift_count": self.drift_count,
            "drifted": list(self.drifted),
            "errors": list(self.errors),
            "repository": dict(self.repository or {}),
            "last_push_at": self.last_push_at.isoformat() if self.last_push_at else None,
            "last_push_age_seconds": self.last_push_age_seconds,
        }
