"""Production profile: refuses to start without its secrets, naming the missing variable."""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import oidc_endpoints
from .env import env_list, require

SECRET_KEY = require("SECRET_KEY")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or [require("ALLOWED_HOSTS")]
OIDC_OP_ISSUER = require("OIDC_OP_ISSUER")
OIDC_RP_CLIENT_ID = require("OIDC_RP_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = require("OIDC_RP_CLIENT_SECRET")
GPUFLEET_OIDC_ENABLED = True
globals().update(oidc_endpoints(OIDC_OP_ISSUER))
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
DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
