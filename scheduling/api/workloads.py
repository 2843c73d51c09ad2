"""/api/v1/workloads/?tenant=SLUG and /api/v1/workloads/NAME/?tenant=SLUG: why is my workload pending?

Scoped like every tenant object: the tenant must be one the caller may see (404 otherwise, no hint it
exists), and only that tenant's namespace is read, so tenant A never sees tenant B's workloads.
"""

from __future__ import annotations

from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet.api.viewsets import AuditActorMixin
from gpufleet.core.errors import ActionError
from infra.errors import PermanentError, TransientError
from scheduling.pending import sources as pending_sources

from .views import visible_tenant

TENANT = OpenApiParameter("tenant", OpenApiTypes.STR, required=True, description="the tenant's slug")


LIST_OF_OBJECTS = build_array_type(build_basic_type(OpenApiTypes.OBJECT))


class ClusterUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "the cluster could not be read"
    default_code = "cluster_unavailable"


def _tenant(request: Request):  # type: ignore[no-untyped-def]
    slug = request.query_params.get("tenant")
    if not slug:
        raise ActionError({"tenant": ["required: the tenant's slug"]})
    return visible_tenant(request, slug)


class WorkloadViewSet(AuditActorMixin, viewsets.ViewSet):
    lookup_value_regex = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"

    @extend_schema(operation_id="workloads_list", parameters=[TENANT], responses={200: LIST_OF_OBJECTS})
    def list(self, request: Request) -> Response:
        tenant = _tenant(request)
        try:
            found = pending_sources.Sources(pending_sources.cluster_ops()).explain_all(tenant)
        except (TransientError, PermanentError) as exc:
            raise ClusterUnavailable(str(exc)) from exc
        return Response([e.as_dict() for e in found])

    @extend_schema(operation_id="workloads_retrieve", parameters=[TENANT], responses={200: OpenApiTypes.OBJECT})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        tenant = _tenant(request)
        try:
            found = pending_sources.Sources(pending_sources.cluster_ops()).explain(tenant, str(pk))
        except LookupError as exc:
            raise exceptions.NotFound(str(exc)) from exc
        except (TransientError, PermanentError) as exc:
            raise ClusterUnavailable(str(exc)) from exc
        return Response(found.as_dict())
