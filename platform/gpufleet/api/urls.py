from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from tenants.api.views import TenantViewSet

from .tokens import ApiTokenViewSet

router = DefaultRouter()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("tokens", ApiTokenViewSet, basename="token")

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("", include(router.urls)),
]
