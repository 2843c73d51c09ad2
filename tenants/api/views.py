"""/api/v1/tenants/: every write goes through tenants.actions; reads are scoped to the caller."""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.answercache import CachedReadsMixin
from gpufleet.api.prefetch import as_rows, attach_rows
from gpufleet.api.representation import model_rows, row_lookups
from gpufleet.api.serializers import no_body
from gpufleet.api.viewsets import ScopedModelViewSet

from .. import actions
from ..isolation.api import TenantIsolationActions
from ..models import Membership, Tenant, can_manage
from .serializers import (
    MembershipSerializer,
    RejectSerializer,
    TenantCreateSerializer,
    TenantSerializer,
    TenantUpdateSerializer,
)


def members():  # type: ignore[no-untyped-def]
    """Memberships with the columns the API shows, not whole User rows (password hash, dates...)."""
    return Membership.objects.select_related("user").only(
        "id", "tenant_id", "user_id", "role", "source", "user__id", "user__username")


# What MembershipSerializer shows, read as rows for list and retrieve answers (gpufleet/api/prefetch.py).
MEMBER_COLUMNS = row_lookups(MembershipSerializer)
TENANT_ROWS = model_rows(TenantSerializer)


def member_rows():  # type: ignore[no-untyped-def]
    """Memberships in the model's order (tenant slug, username) as seen within one tenant: by username.
    Rows are grouped by tenant in Python, so sorting by slug only cost a join with every tenant (and a
    hash of all of them) per page. tests/api/test_representation.py compares it with the model's order."""
    return Membership.objects.order_by("user__username")


class TenantViewSet(CachedReadsMixin, TenantIsolationActions, ScopedModelViewSet):
    queryset = Tenant.objects.all()
    serializer_class = TenantSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = super().get_queryset()
        if self.action == "list":
            # A page of rows, not Tenant objects (gpufleet/api/prefetch.py), with their members attached.
            qs = as_rows(qs, *TENANT_ROWS)
        if self.action not in ("list", "retrieve"):  # those attach member rows (below)
            qs = qs.prefetch_related(Prefetch("memberships", queryset=members()))
        params = self.request.query_params
        if params.get("slug"):
            qs = qs.filter(slug=params["slug"])
        if params.get("phase"):
            qs = qs.filter(phase=params["phase"])
        return qs

    def paginate_queryset(self, queryset):  # type: ignore[no-untyped-def]
        page = super().paginate_queryset(queryset)
        return page if page is None else attach_rows(page, "memberships", member_rows(), MEMBER_COLUMNS,
                                                     parent_model=Tenant)

    def get_object(self) -> Tenant:
        tenant = super().get_object()
        if self.action == "retrieve":
            attach_rows([tenant], "memberships", member_rows(), MEMBER_COLUMNS)
        return tenant

    @extend_schema(parameters=[OpenApiParameter("slug", OpenApiTypes.STR), OpenApiParameter("phase", OpenApiTypes.STR)])
    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().list(request, *args, **kwargs)

    def _require_manager(self, tenant: Tenant) -> None:
        if not can_manage(self.request.user, tenant):
            raise PermissionDenied("only the tenant's owners and admins, or platform admins, may do this")

    @extend_schema(request=TenantCreateSerializer, responses={201: TenantSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = TenantCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        tenant = actions.request_tenant(requested_by=request.user, **payload.validated_data)
        return Response(TenantSerializer(self.get_queryset().get(pk=tenant.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TenantUpdateSerializer, responses={200: TenantSerializer})
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant = self.get_object()
        self._require_manager(tenant)
        payload = TenantUpdateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        if "trust_level" in payload.validated_data and not is_platform_admin(request.user):
            # Trust decides isolation; tenants may not raise their own.
            raise PermissionDenied("only platform admins may change a tenant's trust level")
        tenant = actions.update(tenant, **payload.validated_data)
        return Response(TenantSerializer(self.get_queryset().get(pk=tenant.pk)).data)

    def update(self, request: Request, *args: object, **kwargs: object) -> Response:
        return self.partial_update(request, *args, **kwargs)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant = self.get_object()
        self._require_manager(tenant)
        tenant = actions.delete(tenant)
        return Response(TenantSerializer(self.get_queryset().get(pk=tenant.pk)).data, status=status.HTTP_202_ACCEPTED)

    def _admin_transition(self, fn, request: Request) -> Response:  # type: ignore[no-untyped-def]
        tenant = self.get_object()  # 404 first: no hint that an invisible tenant exists
        if not is_platform_admin(request.user):
            raise PermissionDenied("only platform admins may do this")
        tenant = fn(tenant)
        return Response(TenantSerializer(self.get_queryset().get(pk=tenant.pk)).data)

    @extend_schema(request=None, responses={200: TenantSerializer})
    @action(detail=True, methods=["post"])
    @no_body
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._admin_transition(actions.approve, request)

    @extend_schema(request=RejectSerializer, responses={200: TenantSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        payload = RejectSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return self._admin_transition(
            lambda t: actions.reject(t, payload.validated_data.get("reason", "")), request
        )

    @extend_schema(request=None, responses={200: TenantSerializer})
    @action(detail=True, methods=["post"])
    @no_body
    def suspend(self, request: Request, pk: str | None = None) -> Response:
        return self._admin_transition(actions.suspend, request)

    @extend_schema(request=None, responses={200: TenantSerializer})
    @action(detail=True, methods=["post"])
    @no_body
    def resume(self, request: Request, pk: str | None = None) -> Response:
        return self._admin_transition(actions.resume, request)
