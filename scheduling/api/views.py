"""/api/v1/flavors, node-pools, quotas, quota-requests, endpoints. Scoped per tenant; writes go
through scheduling.actions (400 naming the field on bad input, nothing changed)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.viewsets import ScopedReadOnlyViewSet, ScopedViewSetMixin
from tenants.models import Tenant, can_manage

from .. import actions
from ..models import Cohort, Flavor, GpuNodePool, InferenceEndpoint, Quota, QuotaChangeRequest, TenantScheduling
from ..preview import preview
from . import serializers as s


def visible_tenant(request: Request, slug: Any) -> Tenant:
    """The named tenant if the caller may see it; otherwise 404 (no hint that it exists)."""
    tenant = Tenant.objects.for_user(request.user).filter(slug=str(slug)).first()
    if tenant is None:
        raise NotFound("no such tenant")
    return tenant


def require_manager(request: Request, tenant: Tenant) -> None:
    if not can_manage(request.user, tenant):
        raise PermissionDenied("only the tenant's owners and admins, or platform admins, may do this")


def require_platform_admin(request: Request) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only platform admins may do this")


class FlavorViewSet(ScopedReadOnlyViewSet):
    queryset = Flavor.objects.select_related("gpu_model")
    serializer_class = s.FlavorSerializer


class NodePoolViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = GpuNodePool.objects.select_related("flavor")
    serializer_class = s.NodePoolSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return super().get_queryset() if self.request.user.is_authenticated else GpuNodePool.objects.none()

    @extend_schema(request=s.NodePoolCreateSerializer, responses={201: s.NodePoolSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        require_platform_admin(request)
        payload = s.NodePoolCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        pool = actions.create_node_pool(data.pop("name"), **data)
        return Response(s.NodePoolSerializer(pool).data, status=status.HTTP_201_CREATED)


class QuotaViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Read: members see their tenants' quotas. Write (direct edit): platform admins, audited."""

    queryset = Quota.objects.select_related("tenant", "flavor")
    serializer_class = s.QuotaSerializer

    @extend_schema(request=s.QuotaWriteSerializer, responses={200: s.QuotaSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = s.QuotaWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        tenant = visible_tenant(request, data.pop("tenant"))
        require_platform_admin(request)
        quota = actions.set_quota(tenant, **data)
        return Response(s.QuotaSerializer(self.get_queryset().get(pk=quota.pk)).data)


class QuotaRequestViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = QuotaChangeRequest.objects.select_related("tenant", "flavor", "proposed_by", "reviewed_by")
    serializer_class = s.QuotaRequestSerializer

    @extend_schema(request=s.QuotaRequestCreateSerializer, responses={201: s.QuotaRequestSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = s.QuotaRequestCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        tenant = visible_tenant(request, data.pop("tenant"))
        require_manager(request, tenant)
        change = actions.propose_quota_change(tenant, proposed_by=request.user, **data)
        return Response(s.QuotaRequestSerializer(self.get_queryset().get(pk=change.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def preview(self, request: Request, pk: str | None = None) -> Response:
        return Response(preview(self.get_object()))

    def _review(self, request: Request, fn: Any) -> Response:
        change = self.get_object()  # 404 first
        require_platform_admin(request)
        payload = s.ReviewSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        change = fn(change, reviewer=request.user, comment=payload.validated_data["comment"])
        return Response(s.QuotaRequestSerializer(self.get_queryset().get(pk=change.pk)).data)

    @extend_schema(request=s.ReviewSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, actions.approve_quota_change)

    @extend_schema(request=s.ReviewSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, actions.reject_quota_change)


class EndpointViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
                      viewsets.ReadOnlyModelViewSet):
    queryset = InferenceEndpoint.objects.select_related("tenant", "tier")
    serializer_class = s.EndpointSerializer

    @extend_schema(request=s.EndpointCreateSerializer, responses={201: s.EndpointSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = s.EndpointCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        tenant = visible_tenant(request, data.pop("tenant"))
        require_manager(request, tenant)
        endpoint = actions.create_endpoint(tenant, data.pop("name"), **data)
        return Response(s.EndpointSerializer(self.get_queryset().get(pk=endpoint.pk)).data,
                        status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        endpoint = self.get_object()
        require_manager(request, endpoint.tenant)
        actions.delete_endpoint(endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CohortViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Cohort.objects.select_related("parent")
    serializer_class = s.CohortSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return super().get_queryset() if self.request.user.is_authenticated else Cohort.objects.none()


class TenantSchedulingViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """A tenant's cohort, fair-sharing weight and priority class. Platform admins set them."""

    queryset = TenantScheduling.objects.select_related("tenant", "cohort", "priority_class")
    serializer_class = s.TenantSchedulingSerializer

    @extend_schema(request=s.TenantSchedulingWriteSerializer, responses={200: s.TenantSchedulingSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        payload = s.TenantSchedulingWriteSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        tenant = visible_tenant(request, data.pop("tenant"))
        require_platform_admin(request)
        row = actions.set_tenant_scheduling(tenant, **data)
        return Response(s.TenantSchedulingSerializer(self.get_queryset().get(pk=row.pk)).data)
