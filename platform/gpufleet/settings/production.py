"""Production profile: refuses to start without its secrets, naming the missing variable."""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import CONTENT_SECURITY_POLICY, oidc_endpoints
from .database import database_settings
from .env import env, env_bool, env_list, require, require_secret_key

SECRET_KEY = require_secret_key("SECRET_KEY")
DATABASES = {"default": database_settings(require("DATABASE_URL"))}
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or [require("ALLOWED_HOSTS")]
OIDC_OP_ISSUER = require("OIDC_OP_ISSUER")
OIDC_RP_CLIENT_ID = require("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = require("OIDC_RP_CLIENT_SECRET")
GPUFLEET_OIDC_ENABLED = True
globals().update(oidc_endpoints(OIDC_OP_ISSUER))
CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] = ["'self'", OIDC_OP_ISSUER.rstrip("/")]
GPUFLEET_PASSWORD_LOGIN = False


def _vcluster_url_template(value: str) -> str:
    """Tenant kubeconfigs point at this URL: an https URL whose host contains `{slug}` (no placeholder
    default in production: a placeholder would fail only later, at the tenant's kubectl)."""
    parts = urlsplit(value.replace("{slug}", "slug"))
    if parts.scheme != "https" or not parts.hostname or "{slug}" not in value:
        raise ImproperlyConfigured(
            "GPUFLEET_VCLUSTER_URL_TEMPLATE must be the https URL of each tenant's vCluster API with {slug} in "
            f"it, e.g. https://{{slug}}.vcluster.gpu.corp.internal (got {value!r})"
        )
    return value


GPUFLEET_VCLUSTER_URL_TEMPLATE = _vcluster_url_template(require("GPUFLEET_VCLUSTER_URL_TEMPLATE"))
# Issue 26, F2: never a CA-less kubeconfig in production, whatever the environment says. The CA store
# (GPUFLEET_VCLUSTER_CA_STORE, never empty from the environment) needs OpenBao: without GPUFLEET_OPENBAO_ADDR (or
# an operator's GPUFLEET_VCLUSTER_CA_BUNDLE) the download answers an error naming it, and `gpufleet doctor`
# fails `vcluster/ca`. Not a start-up requirement: the portal, billing and GitOps work without OpenBao.
GPUFLEET_KUBECONFIG_REQUIRE_CA = True
DEBUG = False

# --- HTTPS (docs/operations.md, "Production hardening") ----------------------------------------------
# TLS ends at the ingress, which tells us the original scheme in X-Forwarded-Proto (ingress-nginx sets
# it; the chart's Ingress routes everything through it). Only trust it behind such a proxy.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# The kubelet's probes speak plain HTTP to the pod; a redirect (3xx) still counts as healthy for them.
# Prometheus scrapes /metrics in-cluster over plain HTTP (ServiceMonitor/PodMonitor) and does not count a
# redirect as a scrape: it is exempt. /metrics refuses requests that came through the ingress (see
# gpufleet.observability), so the exemption never serves it to the outside over HTTP.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = int(env("SECURE_HSTS_SECONDS", "31536000") or 31536000)  # one year
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# Preloading is a promise to browser vendors an operator makes for the whole domain; we do not make it
# for them (set SECURE_HSTS_PRELOAD=1 to opt in), so the check that asks for it is silenced on purpose.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]

# No browsable API in production: its HTML forms are a second UI nobody reviews (CSP, CSRF, what it echoes);
# the portal is the UI and clients get JSON. (Development and tests keep DRF's default renderers.)
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]}  # noqa: F405
