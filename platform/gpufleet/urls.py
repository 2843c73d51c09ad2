from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from gpufleet.observability.metrics import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    # Browsers and bookmark tools ask for /favicon.ico whatever the page says: the same icon as <link rel=icon>.
    path("favicon.ico", RedirectView.as_view(url=static("portal/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("gpufleet.api.urls")),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("gpu/", include("scheduling.urls")),
    path("billing/", include("billing.urls")),
    path("fleet/", include("scheduling.fleetops.urls")),
    path("", include("gpufleet.portal.urls")),
]

# Outside DRF's views too, an /api/ path answers in the API's one error format (problem+json).
# Everywhere else the portal's styled pages (templates 400/403/404/500.html), in every profile.
handler404 = "gpufleet.api.errors.not_found"
handler500 = "gpufleet.api.errors.server_error"
