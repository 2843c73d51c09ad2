from django.conf import settings
from django.http import HttpRequest

from gpufleet.accounts.roles import is_billing_admin, is_platform_admin


def portal(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    return {
        "oidc_enabled": settings.GPUFLEET_OIDC_ENABLED,
        "password_login": settings.GPUFLEET_PASSWORD_LOGIN,
        "is_platform_admin": is_platform_admin(user),
        "is_billing_admin": is_billing_admin(user),
    }
