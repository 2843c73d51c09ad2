"""/api/v1/node-health/ (platform admins): each GPU node's state, reasons and planned action; its
remediations with their steps and evidence; POST /api/v1/node-health/NODE/uncordon/ (a person's action)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.fields import Prose
from gpufleet.api.serializers import StrictSerializer
from gpufleet.api.viewsets import AuditActorMixin
from gpufleet.core.errors import ActionError
from gpufleet.instants import InstantError, parse_instant
from infra.errors import PermanentError, TransientError

from . import kube
from .models import Remediation
from .remediation import assess, uncordon

LIST_OF_OBJECTS = build_array_type(build_basic_type(OpenApiTypes.OBJECT))


class UncordonSerializer(StrictSerializer):
    note = Prose(required=False, allow_blank=True, default="", max_length=200)


class ClusterUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "the cluster or the metrics server could not be read"
    default_code = "cluster_unavailable"


def remediation_json(rem: Remediation) -> dict[str, Any]:
    return {"id": rem.pk, "node": rem.node, "flavor": rem.flavor, "state": rem.target_state, "phase": rem.phase,
            "dry_run": rem.dry_run, "started": rem.started, "finished": rem.finished,
            "closed_because": rem.closed_because, "reasons": rem.reasons,
            "steps": [{"at": s.at, "action": s.action, "target": s.target, "outcome": s.outcome, "detail": s.detail,
                       "evidence": s.evidence} for s in rem.steps.all()]}


class NodeHealthViewSet(AuditActorMixin, viewsets.ViewSet):
    lookup_value_regex = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if not is_platform_admin(request.user):
            raise exceptions.PermissionDenied("only platform admins see and act on node health")

    @extend_schema(operation_id="node_health_list", parameters=[OpenApiParameter("at", OpenApiTypes.DATETIME)],
                   responses={200: LIST_OF_OBJECTS})
    def list(self, request: Request) -> Response:
        at = None
        if request.query_params.get("at"):
            try:
                at = parse_instant(request.query_params["at"])
            except InstantError as exc:
                raise ActionError({"at": [exc.reason]}) from exc
        try:
            report = assess(at, ops=kube.cluster_ops(), metrics=kube.metrics_client()).report()
        except (TransientError, PermanentError) as exc:
            raise ClusterUnavailable(str(exc)) from exc
        return Response(report)

    @extend_schema(responses={200: LIST_OF_OBJECTS})
    @action(detail=False, methods=["get"])
    def remediations(self, request: Request) -> Response:
        rows = Remediation.objects.prefetch_related("steps")[:200]
        return Response([remediation_json(r) for r in rows])

    @extend_schema(request=UncordonSerializer, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def uncordon(self, request: Request, pk: str | None = None) -> Response:
        payload = UncordonSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        note = payload.validated_data["note"]
        try:
            rem = uncordon(str(pk), kube.cluster_ops(), note=note)
        except LookupError as exc:
            raise exceptions.NotFound(str(exc)) from exc
        except (TransientError, PermanentError) as exc:
            raise ClusterUnavailable(str(exc)) from exc
        return Response(remediation_json(rem))
