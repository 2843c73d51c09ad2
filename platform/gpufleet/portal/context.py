from django.http import HttpRequest

from gpufleet.accounts.roles import PLATFORM_ROLES, has_role, is_billing_admin, is_platform_admin
from gpufleet.core import conf
from gpufleet.portal.navigation import menu


def portal(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    # The roles the user holds (a platform admin's implied billing powers are not listed twice).
    roles = [role for role in PLATFORM_ROLES if has_role(user, role)]
    match = getattr(request, "resolver_match", None)
    page = f"{match.namespace}:{match.url_name}" if match is not None else ""
    admin = is_platform_admin(user)
    return {
        "menu": menu(page, admin=admin),
        "oidc_enabled": conf.OIDC_ENABLED,
        "password_login": conf.PASSWORD_LOGIN,
        "is_platform_admin": admin,
        "is_billing_admin": is_billing_admin(user),
        # Shown beside the signed-in user so people know which powers the pages will give them.
        "user_roles": roles,
    }
