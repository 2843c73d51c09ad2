from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from scheduling.api.clusters import QueueView
from scheduling.api.urls import register as register_scheduling
from scheduling.clusters.sync_api import SyncStatusView
from tenants.api.members import MemberViewSet
from tenants.api.views import TenantViewSet
from tenants.isolation.api import AllocationPolicyViewSet

from .tokens import ApiTokenViewSet

# Collections served outside the root router; the API root lists them too, so a client discovers
# every collection from `GET /api/v1/`.
EXTRA_ROOT_ENTRIES = {
    "billing/usage": "billing-usage",
    "billing/invoices": "billing-invoice-list",
    "billing/prices": "billing-price-list",
    "billing/reconciliation": "billing-reconciliation",
    "billing/exports": "billing-export",
    "sync": "sync-status",
    "queue": "queue",
    "fleet/idle": "fleet-idle",
    "fleet/utilisation": "fleet-utilisation",
}


class Router(DefaultRouter):
    def get_api_root_view(self, api_urls=None):  # type: ignore[no-untyped-def]
        entries = {prefix: self.routes[0].name.format(basename=basename) for prefix, _, basename in self.registry}
        entries.update(EXTRA_ROOT_ENTRIES)
        return self.APIRootView.as_view(api_root_dict=dict(sorted(entries.items())))


router = Router()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("members", MemberViewSet, basename="member")
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("gpu-allocation-policies", AllocationPolicyViewSet, basename="gpu-allocation-policy")
register_scheduling(router)  # flavors, node-pools, quotas, quota-requests, endpoints, clusters, placements

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("sync/", SyncStatusView.as_view(), name="sync-status"),
    path("queue/", QueueView.as_view(), name="queue"),
    path("billing/", include("billing.api.urls")),
    path("fleet/", include("scheduling.fleetops.api")),
    path("", include(router.urls)),
]
