"""API for isolation: GPU allocation policy per trust level (admins write), a tenant's isolation
settings, its kubeconfig and its dropped flows (views mixed into TenantViewSet)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.serializers import StrictSerializer, documented
from gpufleet.api.viewsets import AuditActorMixin
from gpufleet.core import conf
from infra.cilium import CiliumCLI
from infra.errors import InfraError

from . import actions
from .kubeconfig import kubeconfig_yaml
from .models import AllocationPolicy
from .summary import isolation_data


class AllocationPolicySerializer(serializers.ModelSerializer):
    class Meta:
        model = AllocationPolicy
        fields = ["trust_level", "allowed_modes", "world_egress", "updated"]
        read_only_fields = fields


STRINGS = {"type": "array", "items": {"type": "string"}}


class AllocationPolicyUpdateSerializer(StrictSerializer):
    """Values stay raw for the action, which names the reason; the schema states their types."""

    allowed_modes = documented(serializers.JSONField, STRINGS, required=False)
    world_egress = documented(serializers.JSONField, {"type": "boolean"}, required=False)


class AllocationPolicyViewSet(AuditActorMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                              viewsets.GenericViewSet):
    """The policy is platform-wide and not secret: everyone signed in reads it; admins change it."""

    queryset = AllocationPolicy.objects.all()
    serializer_class = AllocationPolicySerializer
    permission_classes = [IsAuthenticated]
    lookup_field = "trust_level"

    @extend_schema(request=AllocationPolicyUpdateSerializer, responses={200: AllocationPolicySerializer})
    def partial_update(self, request: Request, trust_level: str | None = None) -> Response:
        row = self.get_object()
        if not is_platform_admin(request.user):
            raise PermissionDenied("only platform admins may change the GPU allocation policy")
        payload = AllocationPolicyUpdateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        row = actions.set_level_policy(row.trust_level, **payload.validated_data)
        return Response(AllocationPolicySerializer(row).data)


class TenantIsolationSerializer(StrictSerializer):
    allowed_modes = documented(serializers.JSONField, STRINGS, required=False, allow_null=True)
    egress_cidrs = documented(serializers.JSONField, STRINGS, required=False)
    egress_fqdns = documented(serializers.JSONField, STRINGS, required=False)

    def reason_for_unknown(self, name: str) -> str:
        return "is not a field that can be changed"


class HubbleUnavailable(APIException):
    """The flow log needs the hubble CLI on the web host; without it the answer is a 503 problem."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    # The body says only this (gpufleet.api.errors: a 5xx names no host or exception text; the log does).
    default_detail = ("the flow log could not be read: the hubble CLI is missing, failed, or its output was "
                      "not JSON (the server log says which)")
    default_code = "hubble_unavailable"


class TenantIsolationActions:
    """Mixed into TenantViewSet: every view starts with get_object(), so other tenants are 404."""

    @extend_schema(request=TenantIsolationSerializer, responses={200: dict})
    @action(detail=True, methods=["get", "patch"])
    def isolation(self, request: Request, pk: str | None = None) -> Response:
        tenant = self.get_object()  # type: ignore[attr-defined]
        if request.method == "PATCH":
            if not is_platform_admin(request.user):
                raise PermissionDenied("only platform admins may change a tenant's isolation")
            payload = TenantIsolationSerializer(data=request.data)
            payload.is_valid(raise_exception=True)
            actions.set_tenant_isolation(tenant, **payload.validated_data)
        return Response(isolation_data(tenant))

    @extend_schema(responses={(200, "application/yaml"): str})
    @action(detail=True, methods=["get"])
    def kubeconfig(self, request: Request, pk: str | None = None) -> HttpResponse:
        tenant = self.get_object()  # type: ignore[attr-defined]
        response = HttpResponse(kubeconfig_yaml(tenant), content_type="application/yaml")
        response["Content-Disposition"] = f'attachment; filename="{tenant.slug}-kubeconfig.yaml"'
        return response

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], url_path="dropped-flows")
    def dropped_flows(self, request: Request, pk: str | None = None) -> Response:
        tenant = self.get_object()  # type: ignore[attr-defined]
        cli = CiliumCLI(timeout=float(conf.HUBBLE_TIMEOUT_SECONDS))
        try:
            flows = cli.dropped_flows(tenant.namespace)
        except InfraError as exc:
            raise HubbleUnavailable(str(exc)) from exc
        return Response({"namespace": tenant.namespace, "flows": [f.as_dict() for f in flows]})
