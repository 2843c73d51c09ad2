from django.urls import include, path
from rest_framework.routers import DefaultRouter

from .views import ExportView, InvoiceViewSet, PriceViewSet, ReconciliationView, UsageView

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("invoices", InvoiceViewSet, basename="billing-invoice")
router.register("prices", PriceViewSet, basename="billing-price")

urlpatterns = [
    path("usage/", UsageView.as_view(), name="billing-usage"),
    path("reconciliation/", ReconciliationView.as_view(), name="billing-reconciliation"),
    path("exports/", ExportView.as_view(), name="billing-export"),
    path("", include(router.urls)),
]
