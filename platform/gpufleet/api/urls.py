from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from scheduling.api.urls import register as register_scheduling
from scheduling.sync_api import SyncStatusView
from tenants.api.views import TenantViewSet
from tenants.isolation.api import AllocationPolicyViewSet

from .tokens import ApiTokenViewSet

router = DefaultRouter()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("gpu-allocation-policies", AllocationPolicyViewSet, basename="gpu-allocation-policy")
register_scheduling(router)  # flavors, node-pools, quotas, quota-requests, endpoints

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("sync/", SyncStatusView.as_view(), name="sync-status"),
    path("billing/", include("billing.api.urls")),
    path("", include(router.urls)),
]
