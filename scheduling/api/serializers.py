"""Shapes of the scheduling API. Rules live in scheduling.actions; these only describe fields."""

from __future__ import annotations

from rest_framework import serializers

from gpufleet.api.fields import NameField, Prose
from gpufleet.api.representation import CompiledRepresentation
from gpufleet.api.serializers import StrictSerializer, documented

from ..models import Cohort, Flavor, GpuNodePool, InferenceEndpoint, Quota, QuotaChangeRequest, TenantScheduling

# What scheduling.validation enforces, said in the published schema.
COUNT_MAX = 1_000_000
COUNT_SCHEMA = {"type": "integer", "minimum": 0, "maximum": COUNT_MAX}
NAME_SCHEMA = {"type": "string", "maxLength": 63, "pattern": "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"}
ENDPOINT_NAME_SCHEMA = {**NAME_SCHEMA, "maxLength": 50}
MODEL_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": '^[^"\\\\{}\\n]*\\S[^"\\\\{}\\n]*$'}
KV_CACHE_SCHEMA = {"type": "number", "minimum": 0.05, "maximum": 1}
QUEUE_TARGET_SCHEMA = {"type": "integer", "minimum": 1, "maximum": COUNT_MAX}
STRINGS_SCHEMA = {"type": "array", "items": {"type": "string"}}
DURATION_SCHEMA = {"type": "string", "pattern": "^((\\d+(s|m|h))+|Never)$"}
WEIGHT_SCHEMA = {"type": "number", "minimum": 0, "maximum": 1000}



class FlavorSerializer(CompiledRepresentation, serializers.ModelSerializer):
    gpu_model = serializers.CharField(source="gpu_model.name", read_only=True)
    dcgm_model_name = serializers.CharField(source="gpu_model.dcgm_model_name", read_only=True)
    resource_name = serializers.CharField(read_only=True)

    class Meta:
        model = Flavor
        fields = ["id", "name", "gpu_model", "dcgm_model_name", "mode", "mig_profile", "memory_percent",
                  "cores_percent", "weight", "capacity", "overcommit_factor", "resource_name", "node_labels",
                  "tolerations", "taints"]
        read_only_fields = fields


class NodePoolSerializer(serializers.ModelSerializer):
    flavor = serializers.CharField(source="flavor.name", read_only=True)
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = GpuNodePool
        fields = ["id", "name", "flavor", "instance_types", "capacity_types", "gpu_limit", "gpus_per_node",
                  "node_class", "consolidation_policy", "consolidate_after", "allow_underutilized", "warnings"]
        read_only_fields = fields


class NodePoolCreateSerializer(StrictSerializer):
    name = documented(NameField, NAME_SCHEMA)
    flavor = NameField()
    gpu_limit = documented(serializers.JSONField, COUNT_SCHEMA)
    instance_types = documented(serializers.JSONField, STRINGS_SCHEMA, required=False)
    capacity_types = documented(serializers.JSONField, STRINGS_SCHEMA, required=False)
    consolidation_policy = documented(serializers.CharField, serializers.ChoiceField(
        choices=GpuNodePool.Consolidation.choices), required=False)
    consolidate_after = documented(serializers.CharField, DURATION_SCHEMA, required=False, default="1h")
    allow_underutilized = serializers.BooleanField(required=False, default=False)
    gpus_per_node = documented(serializers.JSONField, COUNT_SCHEMA, required=False, default=8)


class QuotaSerializer(CompiledRepresentation, serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    flavor = serializers.CharField(source="flavor.name", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)

    class Meta:
        model = Quota
        fields = ["id", "tenant", "flavor", "cluster", "nominal", "borrowing_limit", "lending_limit", "updated"]
        read_only_fields = fields


class QuotaWriteSerializer(StrictSerializer):
    """Numbers stay raw (JSONField) so the action reports 'must not be negative' etc. on the field."""

    tenant = NameField()
    flavor = NameField()
    # The host cluster the quota is for (default: the tenant's home cluster).
    cluster = NameField(required=False)
    nominal = documented(serializers.JSONField, COUNT_SCHEMA)
    borrowing_limit = documented(serializers.JSONField, COUNT_SCHEMA, required=False, allow_null=True)
    lending_limit = documented(serializers.JSONField, COUNT_SCHEMA, required=False, allow_null=True)


class QuotaUpdateSerializer(StrictSerializer):
    """PATCH: only the fields sent change (null: no limit); tenant, flavor and cluster name the quota."""

    nominal = documented(serializers.JSONField, COUNT_SCHEMA, required=False)
    borrowing_limit = documented(serializers.JSONField, COUNT_SCHEMA, required=False, allow_null=True)
    lending_limit = documented(serializers.JSONField, COUNT_SCHEMA, required=False, allow_null=True)

    def reason_for_unknown(self, name: str) -> str:
        return "is immutable" if name in ("tenant", "flavor", "cluster") else "is not a field that can be changed"


class QuotaRequestCreateSerializer(QuotaWriteSerializer):
    reason = Prose(required=False, allow_blank=True, default="")


class QuotaRequestSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    flavor = serializers.CharField(source="flavor.name", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    proposed_by = serializers.CharField(source="proposed_by.username", read_only=True, default=None)
    reviewed_by = serializers.CharField(source="reviewed_by.username", read_only=True, default=None)

    class Meta:
        model = QuotaChangeRequest
        fields = ["id", "tenant", "flavor", "cluster", "nominal", "borrowing_limit", "lending_limit", "reason", "state",
                  "proposed_by", "reviewed_by", "review_comment", "branch", "revision", "created", "reviewed_at"]
        read_only_fields = fields


class ReviewSerializer(StrictSerializer):
    comment = Prose(required=False, allow_blank=True, default="", max_length=2000)


class EndpointSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    tier = serializers.CharField(source="tier.name", read_only=True)

    class Meta:
        model = InferenceEndpoint
        fields = ["id", "tenant", "name", "model", "deployment", "tier", "queue_target", "kv_cache_target",
                  "gated", "created"]
        read_only_fields = fields


class EndpointCreateSerializer(StrictSerializer):
    tenant = NameField()
    name = documented(NameField, ENDPOINT_NAME_SCHEMA)
    model = documented(serializers.CharField, MODEL_SCHEMA)
    tier = NameField()
    deployment = documented(NameField, NAME_SCHEMA, required=False)
    queue_target = documented(serializers.JSONField, QUEUE_TARGET_SCHEMA, required=False)
    kv_cache_target = documented(serializers.JSONField, KV_CACHE_SCHEMA, required=False)
    triggers = serializers.JSONField(required=False)
    # JSON, checked by the action: a 400 naming `gated` for a non-boolean, and for a gated model without a store.
    gated = serializers.JSONField(required=False, help_text="the model is gated on Hugging Face: the tenant's "
                                                            "token (from OpenBao) is required")


class CohortSerializer(serializers.ModelSerializer):
    parent = serializers.CharField(source="parent.name", read_only=True, default=None)

    class Meta:
        model = Cohort
        fields = ["id", "name", "parent", "fair_sharing_weight"]
        read_only_fields = fields


class TenantSchedulingSerializer(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    cohort = serializers.CharField(source="cohort.name", read_only=True, default=None)
    priority_class = serializers.CharField(source="priority_class.name", read_only=True, default=None)

    class Meta:
        model = TenantScheduling
        fields = ["id", "tenant", "cohort", "fair_sharing_weight", "priority_class"]
        read_only_fields = fields


class TenantSchedulingWriteSerializer(StrictSerializer):
    tenant = NameField()
    cohort = NameField(required=False, allow_blank=True)
    fair_sharing_weight = documented(serializers.JSONField, WEIGHT_SCHEMA, required=False)
    priority_class = NameField(required=False, allow_blank=True)
