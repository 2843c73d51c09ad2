"""The groups-claim parser: pure, so every odd shape a directory can send is checked here."""

from __future__ import annotations

import pytest

from gpufleet.accounts.groups import GroupGrants, parse_groups


def test_platform_roles_and_memberships():
    grants = parse_groups(["platform-admin", "billing-admin", "gpufleet:acme:owner", "gpufleet:ml-team-2:viewer"])
    assert grants.platform_roles == {"platform-admin", "billing-admin"}
    assert grants.memberships == {"acme": "owner", "ml-team-2": "viewer"}


@pytest.mark.parametrize("order", [
    ["gpufleet:acme:viewer", "gpufleet:acme:owner", "gpufleet:acme:member"],
    ["gpufleet:acme:owner", "gpufleet:acme:viewer", "gpufleet:acme:admin"],
    ["gpufleet:acme:member", "gpufleet:acme:admin", "gpufleet:acme:owner"],
])
def test_strongest_role_wins_whatever_the_order(order):
    assert parse_groups(order).memberships == {"acme": "owner"}


def test_admin_beats_member_beats_viewer():
    assert parse_groups(["gpufleet:a1b:viewer", "gpufleet:a1b:member"]).memberships == {"a1b": "member"}
    assert parse_groups(["gpufleet:a1b:member", "gpufleet:a1b:admin"]).memberships == {"a1b": "admin"}


@pytest.mark.parametrize("group", [
    "gpufleet:acme:superuser",       # unknown role
    "gpufleet:acme:Owner",           # roles are lowercase
    "gpufleet:ACME:owner",           # slugs are lowercase
    "gpufleet:ab:owner",             # slug too short
    "gpufleet:" + "a" * 41 + ":owner",  # slug too long
    "gpufleet:-acme:owner",          # slug must start with a letter or digit
    "gpufleet:acme-:owner",          # ...and end with one
    "gpufleet:acmé:owner",           # ASCII only
    "gpufleet:acme",                 # no role
    "gpufleet:acme:owner:extra",     # trailing parts
    "gpufleet::owner",
    "xgpufleet:acme:owner",
    "gpufleet:acme:owner\n",         # no trimming: not spelled exactly, not granted
    " platform-admin",
    "platform-admins",               # near misses of the platform roles
    "Platform-Admin",
    "wiki-editors",
    "",
])
def test_bad_or_unknown_groups_are_ignored(group):
    assert parse_groups([group]) == GroupGrants(), group


@pytest.mark.parametrize("claim", [None, 42, {"platform-admin": True}, b"platform-admin", 3.5])
def test_claim_of_the_wrong_type_grants_nothing(claim):
    assert parse_groups(claim) == GroupGrants()


def test_non_string_items_are_skipped_and_the_rest_count():
    assert parse_groups([None, 7, ["platform-admin"], "gpufleet:acme:member"]) == GroupGrants(
        frozenset(), {"acme": "member"}
    )


def test_single_string_claim_and_keycloak_full_paths():
    assert parse_groups("platform-admin").platform_roles == {"platform-admin"}
    assert parse_groups(("/gpufleet:acme:admin", "/billing-admin")) == GroupGrants(
        frozenset({"billing-admin"}), {"acme": "admin"}
    )
