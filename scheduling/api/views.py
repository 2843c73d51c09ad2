"""/api/v1/flavors, node-pools, quotas, quota-requests, endpoints. Scoped per tenant; writes go
through scheduling.actions (400 naming the field on bad input, nothing changed)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.answercache import CachedReadsMixin
from gpufleet.api.prefetch import as_rows
from gpufleet.api.representation import row_lookups
from gpufleet.api.viewsets import ScopedReadOnlyViewSet, ScopedViewSetMixin
from scheduling.quotas.preview import preview
from tenants.models import Tenant, can_manage

from .. import actions
from ..models import Cohort, Flavor, GpuNodePool, InferenceEndpoint, Quota, QuotaChangeRequest, TenantScheduling
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


def validated(serializer_class: type[Serializer], request: Request) -> dict[str, Any]:
    """The request body as `serializer_class` accepts it (a 400 naming the field otherwise)."""
    payload = serializer_class(data=request.data)
    payload.is_valid(raise_exception=True)
    return dict(payload.validated_data)


class TenantWriteMixin(ScopedViewSetMixin):
    """Writes whose body names a tenant; the answer is the row read back through the caller's scope."""

    serializer_class: type[Serializer]

    def tenant_payload(self, request: Request, serializer_class: type[Serializer]) -> tuple[Tenant, dict[str, Any]]:
        data = validated(serializer_class, request)
        return visible_tenant(request, data.pop("tenant")), data

    def scoped_response(self, row: Any, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.serializer_class(self.get_queryset().get(pk=row.pk)).data, status=code)


@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter("mode", OpenApiTypes.STR)]))
class FlavorViewSet(ScopedReadOnlyViewSet):
    queryset = Flavor.objects.select_related("gpu_model")
    serializer_class = s.FlavorSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = super().get_queryset()
        mode = self.request.query_params.get("mode")
        return qs.filter(mode=mode) if mode else qs


class NodePoolViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = GpuNodePool.objects.select_related("flavor")
    serializer_class = s.NodePoolSerializer

    @extend_schema(request=s.NodePoolCreateSerializer, responses={201: s.NodePoolSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        require_platform_admin(request)
        data = validated(s.NodePoolCreateSerializer, request)
        pool = actions.create_node_pool(data.pop("name"), **data)
        return Response(s.NodePoolSerializer(pool).data, status=status.HTTP_201_CREATED)


def by_tenant(qs: Any, request: Request, **names: str) -> Any:
    """The list filters Terraform and the portal use: `?tenant=<slug>` and exact matches on `names`."""
    params = request.query_params
    if params.get("tenant"):
        qs = qs.filter(tenant__slug=params["tenant"])
    for param, lookup in names.items():
        if params.get(param):
            qs = qs.filter(**{lookup: params[param]})
    return qs


QUOTA_ROW = row_lookups(s.QuotaSerializer)
READ_COLUMNS = ("id", "tenant_id", "flavor_id", "cluster_id", "nominal", "borrowing_limit", "lending_limit", "updated")
TENANT_FILTER = OpenApiParameter("tenant", OpenApiTypes.STR, description="tenant slug")


@extend_schema_view(list=extend_schema(parameters=[TENANT_FILTER, OpenApiParameter("flavor", OpenApiTypes.STR),
                                                  OpenApiParameter("cluster", OpenApiTypes.STR)]))
class QuotaViewSet(CachedReadsMixin, TenantWriteMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
                   viewsets.ReadOnlyModelViewSet):
    """Read: members see their tenants' quotas. Write (direct edit, delete): platform admins, audited;
    tenant admins go through quota requests."""

    queryset = Quota.objects.select_related("tenant", "flavor", "cluster")
    serializer_class = s.QuotaSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = by_tenant(super().get_queryset(), self.request, flavor="flavor__name", cluster="cluster__name")
        if self.action == "list":
            # A page of rows with just the columns shown, not model objects (gpufleet/api/prefetch.py).
            return as_rows(qs, QUOTA_ROW)
        if self.action == "retrieve":
            # Reads show the tenant's slug, the flavor's and the cluster's name: not their JSON columns
            # (conditions, applied objects, labels, taints), which were most of a page's decoding
            # (benchmarks/README.md).
            qs = qs.only(*READ_COLUMNS, "tenant__slug", "flavor__name", "cluster__name")
        return qs

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        quota = self.get_object()
        require_platform_admin(request)
        actions.delete_quota(quota)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.QuotaWriteSerializer, responses={200: s.QuotaSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Create or replace the quota of (tenant, flavor, cluster): a limit not sent is "no limit"."""
        if request.headers.get("If-Match"):
            # A replace cannot be conditional on a representation the client names by URL: say so rather
            # than ignore the header (a client relying on it would overwrite someone's change).
            raise ValidationError({"If-Match": [
                "POST creates or replaces the whole quota and takes no If-Match; change an existing quota with "
                "PATCH /api/v1/quotas/{id}/ and If-Match"]})
        tenant, data = self.tenant_payload(request, s.QuotaWriteSerializer)
        require_platform_admin(request)
        quota = actions.set_quota(tenant, **data)
        return self.scoped_response(quota)

    @extend_schema(request=s.QuotaUpdateSerializer, responses={200: s.QuotaSerializer})
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Change some of a quota's numbers; the fields not sent keep their value. If-Match is honoured."""
        quota = self.get_object()
        require_platform_admin(request)
        return self.scoped_response(actions.update_quota(quota, **validated(s.QuotaUpdateSerializer, request)))

    def lock_for_write(self, obj: Any) -> None:
        # The tenant's row, as every quota action takes it first (scheduling.actions.update_quota).
        Tenant.objects.select_for_update().filter(pk=obj.tenant_id).values_list("pk").first()


@extend_schema_view(list=extend_schema(parameters=[TENANT_FILTER, OpenApiParameter("state", OpenApiTypes.STR)]))
class QuotaRequestViewSet(TenantWriteMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = QuotaChangeRequest.objects.select_related("tenant", "flavor", "cluster", "proposed_by", "reviewed_by")
    serializer_class = s.QuotaRequestSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return by_tenant(super().get_queryset(), self.request, state="state")

    @extend_schema(request=s.QuotaRequestCreateSerializer, responses={201: s.QuotaRequestSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant, data = self.tenant_payload(request, s.QuotaRequestCreateSerializer)
        require_manager(request, tenant)
        change = actions.propose_quota_change(tenant, proposed_by=request.user, **data)
        return self.scoped_response(change, status.HTTP_201_CREATED)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"])
    def preview(self, request: Request, pk: str | None = None) -> Response:
        return Response(preview(self.get_object()))

    def _review(self, request: Request, fn: Any) -> Response:
        change = self.get_object()  # 404 first
        require_platform_admin(request)
        comment = validated(s.ReviewSerializer, request)["comment"]
        return self.scoped_response(fn(change, reviewer=request.user, comment=comment))

    @extend_schema(request=s.ReviewSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, actions.approve_quota_change)

    @extend_schema(request=s.ReviewSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, actions.reject_quota_change)


@extend_schema_view(list=extend_schema(parameters=[TENANT_FILTER, OpenApiParameter("name", OpenApiTypes.STR)]))
class EndpointViewSet(TenantWriteMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
                      viewsets.ReadOnlyModelViewSet):
    queryset = InferenceEndpoint.objects.select_related("tenant", "tier")
    serializer_class = s.EndpointSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return by_tenant(super().get_queryset(), self.request, name="name")

    @extend_schema(request=s.EndpointCreateSerializer, responses={201: s.EndpointSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant, data = self.tenant_payload(request, s.EndpointCreateSerializer)
        require_manager(request, tenant)
        endpoint = actions.create_endpoint(tenant, data.pop("name"), **data)
        return self.scoped_response(endpoint, status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        endpoint = self.get_object()
        require_manager(request, endpoint.tenant)
        actions.delete_endpoint(endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CohortViewSet(ScopedReadOnlyViewSet):
    queryset = Cohort.objects.select_related("parent")
    serializer_class = s.CohortSerializer


class TenantSchedulingViewSet(TenantWriteMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """A tenant's cohort, fair-sharing weight and priority class. Platform admins set them."""

    queryset = TenantScheduling.objects.select_related("tenant", "cohort", "priority_class")
    serializer_class = s.TenantSchedulingSerializer

    @extend_schema(request=s.TenantSchedulingWriteSerializer, responses={200: s.TenantSchedulingSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant, data = self.tenant_payload(request, s.TenantSchedulingWriteSerializer)
        require_platform_admin(request)
        row = actions.set_tenant_scheduling(tenant, **data)
        return self.scoped_response(row)
