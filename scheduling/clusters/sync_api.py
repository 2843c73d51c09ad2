"""`GET /api/v1/sync/`: the latest fleet sync run (platform admins only), with recent history."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpufleet.api.permissions import IsPlatformAdmin
from gpufleet.api.viewsets import AuditActorMixin
from scheduling.clusters.sync_models import SyncRun

HISTORY = 10


class SyncStatusView(AuditActorMixin, APIView):
    """The fleet sync's latest run and recent history (platform admins only)."""

    permission_classes = [IsPlatformAdmin]

    @extend_schema(
        summary="Latest GitOps sync status: last run, drift repaired, errors",
        description="`latest` (or null before the first run), `last_success` (finish time of the latest run "
        "without errors) and `history` (the last 10 runs, newest first). Each run: started, finished, "
        "state (running/ok/partial/failed), owners, objects_checked, objects_changed, drift_count, "
        "drifted (paths), errors, repository (the GitOps repository's condition: status, reason, message, "
        "head, and push: the push sidecar's last round), last_push_at and last_push_age_seconds.",
        responses=dict,
    )
    def get(self, request: Request) -> Response:
        runs = list(SyncRun.objects.order_by("-started", "-id")[:HISTORY])
        body: dict[str, Any] = {
            "latest": runs[0].as_status() if runs else None,
            "last_success": next((r.finished.isoformat() for r in runs if r.state == SyncRun.State.OK
                                  and r.finished), None),
            "history": [r.as_status() for r in runs],
        }
        return Response(body)
