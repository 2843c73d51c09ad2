from django.urls import path, re_path
from django.views.generic import RedirectView

from . import price_views, views

app_name = "billing"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="billing:invoice-list", permanent=False), name="index"),
    path("usage/<slug:slug>/", views.usage, name="usage"),
    path("invoices/", views.invoice_list, name="invoice-list"),
    path("invoices/<int:pk>/", views.invoice_detail, name="invoice-detail"),
    path("invoices/<int:pk>/finalize/", views.invoice_finalize, name="invoice-finalize"),
    path("invoices/<int:pk>/void/", views.invoice_void, name="invoice-void"),
    path("invoices/<int:pk>/reissue/", views.invoice_reissue, name="invoice-reissue"),
    re_path(r"^invoices/(?P<pk>[0-9]+)/download\.(?P<fmt>csv|json)$", views.invoice_download, name="invoice-download"),
    path("prices/", price_views.price_list, name="price-list"),
    path("prices/new/", price_views.price_set, name="price-set"),
    path("reconciliation/", views.reconciliation_report, name="reconciliation"),
    path("exports/", views.export, name="exports"),
]
