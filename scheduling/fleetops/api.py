"""REST API of fleet operations, scoped: platform admins see the fleet, everyone else their tenants."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.metering.usage import MeteringInputError
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.fields import NameField
from gpufleet.api.serializers import StrictSerializer, documented
from gpufleet.api.viewsets import AuditActor
from gpufleet.core.errors import ActionError
from gpufleet.instants import InstantError, parse_instant
from infra.errors import PermanentError, TransientError
from scheduling.models import InferenceEndpoint
from tenants.models import Tenant

from . import actions, service
from .models import IdleNotice

WINDOW = [OpenApiParameter("start", OpenApiTypes.DATETIME, required=True),
          OpenApiParameter("end", OpenApiTypes.DATETIME, required=True),
          OpenApiParameter("tenant", OpenApiTypes.STR)]


log = logging.getLogger(__name__)

LIST_OF_OBJECTS = {"type": "array", "items": {"type": "object"}}
# Decimals of an idle finding: the API answers them as text, the CLI's --json as numbers; a notice takes either.
DECIMAL_OR_TEXT = {"oneOf": [{"type": "string"}, {"type": "number"}]}


class FindingSerializer(StrictSerializer):
    """One idle finding as /api/v1/fleet/idle/ and `gpufleet fleet idle --json` answer it (service.idle_findings).

    Shape and types only; notify_owners checks that it is the tenant's and carries what a notice needs."""

    tenant = serializers.CharField(required=False)
    namespace = serializers.CharField(required=False)
    pod = serializers.CharField(required=False)
    container = serializers.CharField(required=False, allow_blank=True)
    device = serializers.CharField(required=False, allow_blank=True)
    mig_instance = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    flavor = serializers.CharField(required=False)
    start = serializers.CharField(required=False)
    end = serializers.CharField(required=False, allow_null=True)
    ongoing = serializers.BooleanField(required=False)
    idle_seconds = documented(serializers.JSONField, {"type": "integer", "minimum": 0}, required=False)
    gpu_equivalent_seconds = documented(serializers.JSONField, DECIMAL_OR_TEXT, required=False, allow_null=True)
    memory_mib = documented(serializers.JSONField, DECIMAL_OR_TEXT, required=False, allow_null=True)
    cost = documented(serializers.JSONField, DECIMAL_OR_TEXT, required=False, allow_null=True)
    currency = serializers.CharField(required=False, allow_blank=True, allow_null=True)  # no price: null
    signal = serializers.CharField(required=False)

    def to_internal_value(self, data: Any) -> Any:
        super().to_internal_value(data)  # shape and types; the action reads the finding as sent
        return data


class NoticeSerializer(StrictSerializer):
    tenant = NameField()
    finding = FindingSerializer()


class ScaleToZeroSerializer(StrictSerializer):
    tier = NameField()


class MetricsUnavailable(APIException):
    status_code = 503
    default_detail = "the metrics server could not be queried; try again later"
    default_code = "metrics_unavailable"


def _time(request: Request, name: str) -> datetime:
    raw = request.query_params.get(name, "")
    if not raw:
        raise ValidationError({name: ["is required (ISO 8601, e.g. 2026-11-01T00:00:00Z)"]})
    try:
        return parse_instant(raw)
    except InstantError as exc:
        raise ValidationError({name: [exc.reason]}) from exc


def _scope(request: Request) -> list[str] | None:
    """The tenants this request may see and asked for (404 for a tenant it may not see)."""
    visible = service.visible_tenants(request.user)
    slug = request.query_params.get("tenant")
    if slug:
        if (visible is not None and slug not in visible) or not Tenant.objects.filter(slug=slug).exists():
            raise NotFound()
        return [slug]
    return visible


def _window(request: Request) -> tuple[datetime, datetime]:
    start, end = _time(request, "start"), _time(request, "end")
    if end <= start:
        raise ValidationError({"end": ["must be after start"]})
    return start, end


def _measure(call: Any) -> Any:
    try:
        return call()
    except MeteringInputError as exc:
        raise ValidationError({exc.field: [exc.reason]}) from exc
    except (TransientError, PermanentError) as exc:
        # The reason (the TSDB's error quotes the query; the URL names its host) goes to the log, not the caller.
        log.warning("fleet metrics query failed: %s", exc)
        raise MetricsUnavailable() from exc


def _json(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (str(v) if v is not None and not isinstance(v, str | int | bool) else v) for k, v in r.items()}
            for r in rows]


class IdleFindingsView(AuditActor, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[*WINDOW, OpenApiParameter("min_idle", OpenApiTypes.INT)],
                   responses={200: LIST_OF_OBJECTS})
    def get(self, request: Request) -> Response:
        start, end = _window(request)
        tenants = _scope(request)
        raw = request.query_params.get("min_idle")
        minimum = None
        if raw is not None:
            if not raw.isdigit() or int(raw) < 1:
                raise ValidationError({"min_idle": ["must be a whole number of minutes, at least 1"]})
            minimum = int(raw)
        rows = _measure(lambda: service.idle_findings(start, end, tenants=tenants, min_idle_minutes=minimum))
        return Response(_json(rows))


class UtilisationView(AuditActor, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=WINDOW, responses={200: LIST_OF_OBJECTS})
    def get(self, request: Request) -> Response:
        start, end = _window(request)
        for name, moment in (("start", start), ("end", end)):
            if moment != moment.replace(minute=0, second=0, microsecond=0):
                raise ValidationError({name: ["must be on a whole hour (utilisation is per hour)"]})
        tenants = _scope(request)
        return Response(_json(_measure(lambda: service.utilisation(start, end, tenants=tenants))))


class NoticesView(AuditActor, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: LIST_OF_OBJECTS})
    def get(self, request: Request) -> Response:
        notices = IdleNotice.objects.for_user(request.user).select_related("tenant")[:200]
        return Response([{"id": n.pk, "tenant": n.tenant.slug, "message": n.message, "finding": n.finding,
                          "created": n.created.isoformat()} for n in notices])

    @extend_schema(request=NoticeSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        """Notify a tenant's owners of an idle finding (platform admins)."""
        if not is_platform_admin(request.user):
            raise PermissionDenied("only platform admins send idle notices")
        payload = NoticeSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        slug = payload.validated_data["tenant"]
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise ValidationError({"tenant": [f"no tenant {slug!r}"]})
        try:
            notice = actions.notify_owners(tenant, payload.validated_data["finding"])
        except ActionError as exc:
            raise ValidationError(exc.errors) from exc
        return Response({"id": notice.pk, "tenant": tenant.slug, "message": notice.message}, status=201)


class ScaleToZeroView(AuditActor, APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=ScaleToZeroSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        """Apply scale-to-zero to an idle inference endpoint: move it to a tier with min_replicas 0."""
        endpoint = InferenceEndpoint.objects.filter(pk=pk).select_related("tenant").first()
        visible = service.visible_tenants(request.user)
        if endpoint is None or (visible is not None and endpoint.tenant.slug not in visible):
            raise NotFound()
        if not is_platform_admin(request.user) and not endpoint.tenant.memberships.filter(
                user=request.user, role="owner").exists():
            raise PermissionDenied("only the tenant's owners or platform admins change an endpoint's tier")
        payload = ScaleToZeroSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            actions.scale_to_zero(endpoint, payload.validated_data["tier"])
        except ActionError as exc:
            raise ValidationError(exc.errors) from exc
        return Response({"endpoint": endpoint.name, "tenant": endpoint.tenant.slug, "tier": endpoint.tier.name})


urlpatterns = [
    path("idle/", IdleFindingsView.as_view(), name="fleet-idle"),
    path("utilisation/", UtilisationView.as_view(), name="fleet-utilisation"),
    path("notices/", NoticesView.as_view(), name="fleet-notices"),
    path("endpoints/<int:pk>/scale-to-zero/", ScaleToZeroView.as_view(), name="fleet-scale-to-zero"),
]
