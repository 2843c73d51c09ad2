"""/api/v1/clusters, placements, placement-requests and queue.

- clusters: every signed-in user reads the catalog of clusters (name, purpose, region, trust, status,
  flavors and capacity) and the placements of tenants they may see; delivery and monitoring references
  (kube_api, kubeconfig_secret, metrics_url, ...) are shown to platform admins only. Platform admins
  register (POST) and change (PATCH, If-Match) clusters; rules live in scheduling.clusters.actions.
- placements: read-only, scoped to the caller's tenants; they change only through placement-requests
  (proposed by the tenant's owners/admins or a platform admin, approved or rejected by a platform admin).
- queue: the one queue view (scheduling.fleetops.queue_view) of the caller's tenants.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpufleet import clock
from gpufleet.accounts.roles import is_platform_admin
from gpufleet.api.fields import NameField, Prose
from gpufleet.api.serializers import StrictSerializer, documented
from gpufleet.api.viewsets import AuditActorMixin, ScopedViewSetMixin
from scheduling.clusters import actions as cluster_actions
from scheduling.clusters import placement_actions
from scheduling.clusters.models import Cluster, ClusterFlavor, Placement, PlacementChangeRequest
from scheduling.fleetops import queue_view
from tenants.models import Tenant

from .serializers import NAME_SCHEMA, STRINGS_SCHEMA, ReviewSerializer
from .views import TENANT_FILTER, TenantWriteMixin, by_tenant, require_manager, require_platform_admin, validated

ADMIN_ONLY = ("gitops_path", "kube_api", "kubeconfig_secret", "metrics_url", "metrics_label", "status_message")
PURPOSE = serializers.ChoiceField(choices=Cluster.Purpose.choices)
TEXT = {"type": "string", "maxLength": 300}
PLACEMENTS_SCHEMA = {"type": "array", "items": {"type": "object", "required": ["tenant", "home"], "properties": {
    "tenant": {"type": "string"}, "home": {"type": "boolean"}}}}


class ClusterFlavorSerializer(serializers.ModelSerializer):
    flavor = serializers.CharField(source="flavor.name", read_only=True)

    class Meta:
        model = ClusterFlavor
        fields = ["flavor", "capacity"]
        read_only_fields = fields


class ClusterSerializer(serializers.ModelSerializer):
    """Admin-only fields are present (null) for everyone else, so the shape never depends on the caller."""

    flavors = ClusterFlavorSerializer(many=True, read_only=True)
    tree = serializers.CharField(read_only=True)
    placements = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = ["id", "name", "purpose", "region", "region_name", "zones", "trust_levels", "tree", "reachable",
                  "last_sync_at", "drift", "flavors", "placements", "created", *ADMIN_ONLY]
        read_only_fields = fields
        extra_kwargs = {name: {"allow_null": True} for name in ADMIN_ONLY}

    @extend_schema_field(PLACEMENTS_SCHEMA)
    def get_placements(self, cluster: Cluster) -> list[dict[str, Any]]:
        visible = self.context.get("visible_tenants")
        rows = [p for p in cluster.placements.all() if visible is None or p.tenant_id in visible]
        return [{"tenant": p.tenant.slug, "home": p.home} for p in rows]

    def to_representation(self, instance: Cluster) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not self.context.get("admin"):
            for name in ADMIN_ONLY:
                data[name] = None
        return data


class ClusterWriteSerializer(StrictSerializer):
    """Values stay raw where the action owns the rule (it names the field and the reason)."""

    name = documented(NameField, NAME_SCHEMA)
    purpose = documented(serializers.CharField, PURPOSE, required=False)
    region = documented(serializers.CharField, {"type": "string", "maxLength": 63}, required=False,
                        allow_blank=True)
    region_name = documented(serializers.CharField, {"type": "string", "maxLength": 200}, required=False,
                             allow_blank=True)
    zones = documented(serializers.JSONField, STRINGS_SCHEMA, required=False)
    trust_levels = documented(serializers.JSONField, {"type": "array", "items": {
        "type": "string", "enum": ["untrusted", "standard", "trusted"]}}, required=False)
    gitops_path = documented(serializers.CharField, {"type": "string", "maxLength": 200}, required=False,
                             allow_blank=True)
    kube_api = documented(serializers.CharField, TEXT, required=False, allow_blank=True)
    kubeconfig_secret = documented(serializers.CharField, TEXT, required=False, allow_blank=True)
    metrics_url = documented(serializers.CharField, TEXT, required=False, allow_blank=True)
    metrics_label = documented(serializers.CharField, {"type": "string", "maxLength": 63}, required=False,
                               allow_blank=True)


class ClusterUpdateSerializer(ClusterWriteSerializer):
    name = None  # type: ignore[assignment]


class ClusterViewSet(ScopedViewSetMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Cluster.objects.prefetch_related("flavors__flavor", "placements__tenant")
    serializer_class = ClusterSerializer
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        user = self.request.user
        context["admin"] = is_platform_admin(user)
        if not context["admin"]:
            context["visible_tenants"] = set(Tenant.objects.for_user(user).values_list("pk", flat=True))
        return context

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = super().get_queryset()
        purpose = self.request.query_params.get("purpose")
        return qs.filter(purpose=purpose) if purpose else qs

    def _answer(self, cluster: Cluster, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.get_serializer(self.get_queryset().get(pk=cluster.pk)).data, status=code)

    @extend_schema(request=ClusterWriteSerializer, responses={201: ClusterSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        require_platform_admin(request)
        data = validated(ClusterWriteSerializer, request)
        return self._answer(cluster_actions.create_cluster(data.pop("name"), **data), status.HTTP_201_CREATED)

    @extend_schema(request=ClusterUpdateSerializer, responses={200: ClusterSerializer})
    def partial_update(self, request: Request, *args: object, **kwargs: object) -> Response:
        cluster = self.get_object()
        require_platform_admin(request)
        return self._answer(cluster_actions.update_cluster(cluster, **validated(ClusterUpdateSerializer, request)))


    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        cluster = self.get_object()
        require_platform_admin(request)
        cluster_actions.delete_cluster(cluster)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PlacementSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)

    class Meta:
        model = Placement
        fields = ["id", "tenant", "cluster", "home", "conditions", "last_reconciled_at", "created"]
        read_only_fields = fields


CLUSTER_FILTER = OpenApiParameter("cluster", OpenApiTypes.STR, description="cluster name")


@extend_schema_view(list=extend_schema(parameters=[TENANT_FILTER, CLUSTER_FILTER]))
class PlacementViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Placement.objects.select_related("tenant", "cluster")
    serializer_class = PlacementSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return by_tenant(super().get_queryset(), self.request, cluster="cluster__name")


class PlacementRequestSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    proposed_by = serializers.CharField(source="proposed_by.username", read_only=True, default=None)
    reviewed_by = serializers.CharField(source="reviewed_by.username", read_only=True, default=None)

    class Meta:
        model = PlacementChangeRequest
        fields = ["id", "tenant", "cluster", "action", "reason", "state", "proposed_by", "reviewed_by",
                  "review_comment", "created", "reviewed_at"]
        read_only_fields = fields


class PlacementRequestCreateSerializer(StrictSerializer):
    tenant = NameField()
    cluster = NameField()
    action = documented(serializers.CharField, serializers.ChoiceField(
        choices=PlacementChangeRequest.Action.choices))
    reason = Prose(required=False, allow_blank=True, default="", max_length=2000)


@extend_schema_view(list=extend_schema(parameters=[TENANT_FILTER, OpenApiParameter("state", OpenApiTypes.STR)]))
class PlacementRequestViewSet(TenantWriteMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Tenant owners/admins and platform admins propose; platform admins approve (apply) or reject."""

    queryset = PlacementChangeRequest.objects.select_related("tenant", "cluster", "proposed_by", "reviewed_by")
    serializer_class = PlacementRequestSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return by_tenant(super().get_queryset(), self.request, state="state")

    @extend_schema(request=PlacementRequestCreateSerializer, responses={201: PlacementRequestSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        tenant, data = self.tenant_payload(request, PlacementRequestCreateSerializer)
        require_manager(request, tenant)
        change = placement_actions.propose_placement_change(tenant, proposed_by=request.user, **data)
        return self.scoped_response(change, status.HTTP_201_CREATED)

    def _review(self, request: Request, fn: Any) -> Response:
        change = self.get_object()  # 404 first
        require_platform_admin(request)
        comment = validated(ReviewSerializer, request)["comment"]
        return self.scoped_response(fn(change, reviewer=request.user, comment=comment))

    @extend_schema(request=ReviewSerializer, responses={200: PlacementRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, placement_actions.approve_placement_change)

    @extend_schema(request=ReviewSerializer, responses={200: PlacementRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._review(request, placement_actions.reject_placement_change)


DECIMAL_OR_NULL = {"type": "string", "nullable": True, "description": "a decimal number"}
QUEUE_ROW_SCHEMA = {"type": "object", "required": [
    "tenant", "flavor", "cluster", "home", "nominal", "borrowing_limit", "admitted", "pending_workloads",
    "wait_p90_seconds", "wait_mean_seconds", "metrics_error"], "properties": {
    "tenant": {"type": "string"}, "flavor": {"type": "string"}, "cluster": {"type": "string"},
    "home": {"type": "boolean"}, "nominal": {"type": "integer"},
    "borrowing_limit": {"type": "integer", "nullable": True},
    "admitted": DECIMAL_OR_NULL, "pending_workloads": {"type": "integer", "nullable": True},
    "wait_p90_seconds": DECIMAL_OR_NULL, "wait_mean_seconds": DECIMAL_OR_NULL,
    "metrics_error": {"type": "string"}}}
QUEUE_SCHEMA = {"type": "object", "required": ["at", "rows"], "properties": {
    "at": {"type": "string", "format": "date-time"}, "rows": {"type": "array", "items": QUEUE_ROW_SCHEMA}}}


def queue_json(rows: list[queue_view.QueueRow]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        data = row.as_dict()
        for key in ("admitted", "wait_p90_seconds", "wait_mean_seconds"):
            data[key] = None if data[key] is None else str(data[key])
        out.append(data)
    return out


class QueueView(AuditActorMixin, APIView):
    """GET: quotas, admitted units, pending workloads and admission waits per tenant x flavor x cluster of the
    tenants the caller may see (`?tenant=`, `?cluster=`, `?flavor=` narrow it)."""

    @extend_schema(parameters=[TENANT_FILTER, CLUSTER_FILTER, OpenApiParameter("flavor", OpenApiTypes.STR)],
                   responses={200: QUEUE_SCHEMA})
    def get(self, request: Request) -> Response:
        tenants = Tenant.objects.for_user(request.user)
        params = request.query_params
        if params.get("tenant"):
            tenants = tenants.filter(slug=params["tenant"])
        at = clock.now()
        rows = queue_view.collect(tenants, at)
        if params.get("cluster"):
            rows = [r for r in rows if r.cluster == params["cluster"]]
        if params.get("flavor"):
            rows = [r for r in rows if r.flavor == params["flavor"]]
        return Response({"at": at, "rows": queue_json(rows)})
