from django.urls import path, re_path

from . import views

app_name = "billing"

urlpatterns = [
    path("usage/<slug:slug>/", views.usage, name="usage"),
    path("invoices/", views.invoice_list, name="invoice-list"),
    path("invoices/<int:pk>/", views.invoice_detail, name="invoice-detail"),
    re_path(r"^invoices/(?P<pk>[0-9]+)/download\.(?P<fmt>csv|json)$", views.invoice_download, name="invoice-download"),
    path("reconciliation/", views.reconciliation_report, name="reconciliation"),
    path("exports/", views.export, name="exports"),
]
