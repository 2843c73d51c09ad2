"""Routes registered on the API's root router (platform/gpufleet/api/urls.py calls `register`)."""

from __future__ import annotations

from rest_framework.routers import BaseRouter

from scheduling.nodehealth.api import NodeHealthViewSet

from .clusters import ClusterViewSet, PlacementRequestViewSet, PlacementViewSet
from .views import (
    CohortViewSet,
    EndpointViewSet,
    FlavorViewSet,
    NodePoolViewSet,
    QuotaRequestViewSet,
    QuotaViewSet,
    TenantSchedulingViewSet,
)
from .workloads import WorkloadViewSet


def register(router: BaseRouter) -> None:
    router.register("flavors", FlavorViewSet, basename="flavor")
    router.register("node-pools", NodePoolViewSet, basename="node-pool")
    router.register("quotas", QuotaViewSet, basename="quota")
    router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
    router.register("endpoints", EndpointViewSet, basename="endpoint")
    router.register("cohorts", CohortViewSet, basename="cohort")
    router.register("tenant-scheduling", TenantSchedulingViewSet, basename="tenant-scheduling")
    router.register("clusters", ClusterViewSet, basename="cluster")
    router.register("placements", PlacementViewSet, basename="placement")
    router.register("placement-requests", PlacementRequestViewSet, basename="placement-request")
    # Issue 11 §3-4: pending explanations (tenant-scoped) and node health (platform admins).
    router.register("workloads", WorkloadViewSet, basename="workload")
    router.register("node-health", NodeHealthViewSet, basename="node-health")
