from django.urls import path, re_path

from . import pages

app_name = "fleetops"

urlpatterns = [
    path("", pages.fleet, name="fleet"),
    path("tenants/<slug:slug>/", pages.tenant_page, name="tenant"),
    re_path(r"^numbers/(?P<kind>idle|utilisation)\.csv$", pages.numbers, name="numbers"),
]
