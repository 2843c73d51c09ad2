from __future__ import annotations

from rest_framework.permissions import BasePermission

from gpufleet.accounts.roles import is_billing_admin, is_platform_admin


class IsPlatformAdmin(BasePermission):
    message = "only platform admins may do this"

    def has_permission(self, request, view) -> bool:  # type: ignore[no-untyped-def]
        return is_platform_admin(request.user)


class IsBillingAdmin(BasePermission):
    message = "only billing admins may do this"

    def has_permission(self, request, view) -> bool:  # type: ignore[no-untyped-def]
        return is_billing_admin(request.user)
