"""gpufleet's URLs plus `/bench/floor`: the least a request can cost on this stack (same server, same
middleware, no database, no DRF): what the API routes are compared with."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from gpufleet.urls import handler404, handler500  # noqa: F401
from gpufleet.urls import urlpatterns as gpufleet_urlpatterns


def floor(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b'{"ok":true}', content_type="application/json")


urlpatterns = [path("bench/floor", floor), *gpufleet_urlpatterns]
