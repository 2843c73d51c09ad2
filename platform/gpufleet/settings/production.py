"""Production profile: refuses to start without its secrets, naming the missing variable."""

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
DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
