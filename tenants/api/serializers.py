from __future__ import annotations

from rest_framework import serializers

from gpufleet.api.fields import NameField, Prose
from gpufleet.api.representation import CompiledRepresentation
from gpufleet.api.serializers import StrictSerializer, documented

from ..actions import DISPLAY_NAME_MAX
from ..models import Membership, Tenant, TrustLevel
from ..slugs import SLUG_MAX, SLUG_MIN

# The schema says what tenants.actions enforces (the action stays the one place the rule is checked).
SLUG_SCHEMA = {"type": "string", "minLength": SLUG_MIN, "maxLength": SLUG_MAX,
               "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"}
TRUST_SCHEMA = serializers.ChoiceField(choices=TrustLevel.choices)
DISPLAY_NAME_SCHEMA = {"type": "string", "maxLength": DISPLAY_NAME_MAX, "pattern": "^[^\\r\\n\\t\\x00]*$"}
ROLE_SCHEMA = serializers.ChoiceField(choices=Membership.Role.choices)


class MembershipSerializer(CompiledRepresentation, serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "role", "source"]
        read_only_fields = fields


class MemberSerializer(CompiledRepresentation, serializers.ModelSerializer):
    """One membership as its own resource: /api/v1/members/ (natural key: tenant slug + username)."""

    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "tenant", "user", "role", "source", "created"]
        read_only_fields = fields


class MemberWriteSerializer(StrictSerializer):
    tenant = serializers.CharField()
    user = serializers.CharField(max_length=150)
    role = documented(serializers.CharField, ROLE_SCHEMA)


class MemberUpdateSerializer(StrictSerializer):
    role = documented(serializers.CharField, ROLE_SCHEMA)

    def reason_for_unknown(self, name: str) -> str:
        return "is immutable" if name in ("tenant", "user") else "is not a field that can be changed"


class TenantSerializer(CompiledRepresentation, serializers.ModelSerializer):
    namespace = serializers.CharField(read_only=True)
    synced = serializers.BooleanField(source="is_synced", read_only=True)
    memberships = MembershipSerializer(many=True, read_only=True)

    class Meta:
        model = Tenant
        fields = [
            "id", "slug", "display_name", "trust_level", "phase", "generation", "observed_generation",
            "synced", "conditions", "namespace", "applied_objects", "last_reconciled_at", "memberships",
            "created", "updated",
        ]
        read_only_fields = fields


class TenantCreateSerializer(StrictSerializer):
    """Shape only; the rules (slug, trust level, uniqueness) live in tenants.actions."""

    slug = documented(NameField, SLUG_SCHEMA, allow_blank=True)
    trust_level = documented(serializers.CharField, TRUST_SCHEMA, allow_blank=True)
    display_name = documented(serializers.CharField, DISPLAY_NAME_SCHEMA, required=False, allow_blank=True)


class TenantUpdateSerializer(StrictSerializer):
    display_name = documented(serializers.CharField, DISPLAY_NAME_SCHEMA, required=False, allow_blank=True)
    trust_level = documented(serializers.CharField, TRUST_SCHEMA, required=False, allow_blank=True)

    def reason_for_unknown(self, name: str) -> str:
        return "is immutable" if name == "slug" else "is not a field that can be changed"


class RejectSerializer(StrictSerializer):
    reason = Prose(required=False, allow_blank=True, max_length=2000)
