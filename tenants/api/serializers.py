from __future__ import annotations

from rest_framework import serializers

from ..actions import DISPLAY_NAME_MAX
from ..models import Membership, Tenant


class MembershipSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["user", "role", "source"]


class TenantSerializer(serializers.ModelSerializer):
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


class TenantCreateSerializer(serializers.Serializer):
    """Shape only; the rules (slug, trust level, uniqueness) live in tenants.actions."""

    slug = serializers.CharField(trim_whitespace=False, allow_blank=True)
    trust_level = serializers.CharField(allow_blank=True)
    display_name = serializers.CharField(required=False, allow_blank=True, max_length=DISPLAY_NAME_MAX)


class TenantUpdateSerializer(serializers.Serializer):
    display_name = serializers.CharField(required=False, allow_blank=True, max_length=DISPLAY_NAME_MAX)
    trust_level = serializers.CharField(required=False, allow_blank=True)

    def validate(self, attrs):  # type: ignore[no-untyped-def]
        unknown = set(self.initial_data) - set(self.fields)
        if unknown:
            immutable = sorted(unknown & {"slug"})
            errors = {name: ["is immutable"] for name in immutable}
            errors.update({name: ["is not a field that can be changed"] for name in sorted(unknown - {"slug"})})
            raise serializers.ValidationError(errors)
        return attrs


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)
