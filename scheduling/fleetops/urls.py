from django.urls import path

from . import pages

app_name = "fleetops"

urlpatterns = [
    path("", pages.fleet, name="fleet"),
    path("tenants/<slug:slug>/", pages.tenant_page, name="tenant"),
]
