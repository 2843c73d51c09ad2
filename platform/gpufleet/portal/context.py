from django.conf import settings
from django.http import HttpRequest

from gpufleet.accounts.roles import BILLING_ADMIN, PLATFORM_ADMIN, is_billing_admin, is_platform_admin


def portal(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    platform_admin = is_platform_admin(user)
    billing_admin = is_billing_admin(user)
    held = ((PLATFORM_ADMIN, platform_admin), (BILLING_ADMIN, billing_admin))
    roles = [role for role, has in held if has]
    return {
        "oidc_enabled": settings.GPUFLEET_OIDC_ENABLED,
        "password_login": settings.GPUFLEET_PASSWORD_LOGIN,
        "is_platform_admin": platform_admin,
        "is_billing_admin": billing_admin,
        # Shown beside the signed-in user so people know which powers the pages will give them.
        "user_roles": roles,
    }
