from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("gpufleet.api.urls")),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("gpu/", include("scheduling.urls")),
    path("billing/", include("billing.urls")),
    path("", include("gpufleet.portal.urls")),
]
