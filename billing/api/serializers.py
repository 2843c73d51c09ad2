from __future__ import annotations

from rest_framework import serializers

from gpufleet.api.fields import Prose
from gpufleet.api.representation import CompiledRepresentation
from gpufleet.api.serializers import StrictSerializer

from ..models import Invoice, InvoiceLine, Price


class InvoiceLineSerializer(CompiledRepresentation, serializers.ModelSerializer):
    adjusts_invoice = serializers.CharField(source="adjusts.number", read_only=True, default=None)

    class Meta:
        model = InvoiceLine
        fields = ["position", "kind", "flavor_name", "cluster_name", "region", "region_name", "availability_zone",
                  "description", "charge_start", "charge_end", "quantity",
                  "unit_price", "amount", "unit_seconds", "gpu_equivalent_seconds", "billed_unit_seconds",
                  "measured_unit_seconds", "adjusts_invoice"]
        read_only_fields = fields


class InvoiceSerializer(CompiledRepresentation, serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    period = serializers.CharField(source="period_label", read_only=True)
    replaces = serializers.CharField(source="replaces.number", read_only=True, default=None)
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta:
        model = Invoice
        fields = ["id", "number", "tenant", "period", "currency", "state", "subtotal", "total", "opencost_cost",
                  "opencost_gpu_hours", "content_hash", "replaces", "drafted_at", "finalized_at", "voided_at",
                  "void_reason", "lines"]
        read_only_fields = fields


class PriceSerializer(CompiledRepresentation, serializers.ModelSerializer):
    flavor = serializers.CharField(source="flavor.name", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True, default=None,
                                    help_text="null: the price of every cluster without a price of its own")

    class Meta:
        model = Price
        fields = ["id", "flavor", "cluster", "currency", "per_unit_hour", "effective_from", "effective_to", "source",
                  "opencost_gpu_hourly", "markup"]
        read_only_fields = fields


class PriceSetSerializer(StrictSerializer):
    """Shape only; the rules live in billing.actions."""

    flavor = serializers.CharField(allow_blank=True)
    cluster = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    per_unit_hour = serializers.CharField(allow_blank=True)
    currency = serializers.CharField(allow_blank=True)
    effective_from = serializers.CharField(required=False, allow_blank=True, allow_null=True)


class DraftSerializer(StrictSerializer):
    period = serializers.CharField()
    tenant = serializers.CharField(required=False, allow_blank=True)


class VoidSerializer(StrictSerializer):
    reason = Prose(allow_blank=True, max_length=2000)
