"""Read the identity provider's groups claim: platform roles and tenant memberships. Pure, no I/O.

Group names understood:
- `platform-admin`, `billing-admin` — platform roles;
- `gpufleet:<tenant slug>:<role>` with role in owner/admin/member/viewer — a tenant membership.
Anything else (other applications' groups, malformed names, unknown roles) is ignored: the claim is shared
with every application behind the same provider, so an unknown group is normal, not an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .roles import PLATFORM_ROLES

# Strongest first: someone listed as both member and owner of a tenant is its owner.
TENANT_ROLES = ("owner", "admin", "member", "viewer")
_RANK = {role: len(TENANT_ROLES) - i for i, role in enumerate(TENANT_ROLES)}
# A DNS-1123 label of 3-40 characters, the tenant slug rule (tenants/slugs.py); the group can only name
# a tenant whose slug was valid, so a looser pattern would only admit names that match nothing.
MEMBERSHIP_GROUP = re.compile(
    r"gpufleet:(?P<tenant>[a-z0-9][a-z0-9-]{1,38}[a-z0-9]):(?P<role>owner|admin|member|viewer)"
)
# Some providers (Keycloak with full group paths) prefix group names with "/".
_PATH_PREFIX = "/"


@dataclass(frozen=True)
class GroupGrants:
    platform_roles: frozenset[str] = frozenset()
    memberships: dict[str, str] = field(default_factory=dict)  # tenant slug -> role


def role_rank(role: str) -> int:
    return _RANK.get(role, 0)


def parse_groups(groups: object) -> GroupGrants:
    """Split a groups claim (a list of strings, or one string) into platform roles and tenant memberships."""
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list | tuple):
        return GroupGrants()
    roles: set[str] = set()
    memberships: dict[str, str] = {}
    for group in groups:
        if not isinstance(group, str):
            continue
        # No trimming or case folding: a group that is not spelled exactly right grants nothing.
        name = group.removeprefix(_PATH_PREFIX)
        if name in PLATFORM_ROLES:
            roles.add(name)
            continue
        match = MEMBERSHIP_GROUP.fullmatch(name)
        if match is None:
            continue
        tenant, role = match["tenant"], match["role"]
        if role_rank(role) > role_rank(memberships.get(tenant, "")):
            memberships[tenant] = role
    return GroupGrants(frozenset(roles), memberships)
