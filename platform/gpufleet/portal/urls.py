from django.urls import path
from mozilla_django_oidc.views import OIDCLogoutView

from .views import admin, auth, home, isolation, tenants, tokens

app_name = "portal"

urlpatterns = [
    path("", home.home, name="home"),
    path("tenants/", tenants.tenant_list, name="tenant-list"),
    path("login/", auth.login, name="login"),
    # Ends the Django session, then the provider's when OIDC is on (gpufleet.accounts.oidc.provider_logout_url).
    path("logout/", OIDCLogoutView.as_view(), name="logout"),
    path("tenants/new/", tenants.tenant_request, name="tenant-request"),
    path("tenants/<slug:slug>/", tenants.tenant_detail, name="tenant-detail"),
    path("tenants/<slug:slug>/rename/", tenants.tenant_rename, name="tenant-rename"),
    path("tenants/<slug:slug>/delete/", tenants.tenant_delete, name="tenant-delete"),
    path("tenants/<slug:slug>/approve/", admin.tenant_approve, name="tenant-approve"),
    path("tenants/<slug:slug>/reject/", admin.tenant_reject, name="tenant-reject"),
    path("tenants/<slug:slug>/suspend/", admin.tenant_suspend, name="tenant-suspend"),
    path("tenants/<slug:slug>/resume/", admin.tenant_resume, name="tenant-resume"),
    path("tenants/<slug:slug>/trust-level/", admin.tenant_trust_level, name="tenant-trust-level"),
    path("tenants/<slug:slug>/isolation/", isolation.isolation, name="tenant-isolation"),
    path("tenants/<slug:slug>/blocked-flows/", isolation.dropped_flows, name="tenant-dropped-flows"),
    path("tenants/<slug:slug>/kubeconfig/", isolation.kubeconfig, name="tenant-kubeconfig"),
    path("approvals/", admin.approvals, name="approvals"),
    path("tokens/", tokens.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token-revoke"),
]
