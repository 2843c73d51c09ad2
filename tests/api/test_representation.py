"""gpufleet.api.representation: the compiled read path gives exactly DRF's own output, row for row."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework import serializers

from billing.api.serializers import InvoiceLineSerializer, InvoiceSerializer, PriceSerializer
from billing.models import Invoice, InvoiceLine, Price
from gpufleet import clock
from gpufleet.api.prefetch import as_rows, attach_rows
from gpufleet.api.representation import CompiledRepresentation, model_rows, row_lookups
from scheduling.api.serializers import FlavorSerializer, QuotaSerializer
from scheduling.models import Flavor, Quota
from tenants.api.serializers import MemberSerializer, MembershipSerializer, TenantSerializer
from tenants.api.views import member_rows
from tenants.models import Membership, Tenant

from .test_query_counts import World

pytestmark = pytest.mark.django_db


def _drf(monkeypatch, serializer_class, rows):  # type: ignore[no-untyped-def]
    """The same serializer with DRF's generic to_representation everywhere (nested serializers too)."""
    with monkeypatch.context() as patched:
        patched.setattr(CompiledRepresentation, "to_representation", serializers.Serializer.to_representation)
        return serializer_class(rows, many=True).data


def _world() -> World:
    world = World()
    world.members(world.tenant, 3)
    Tenant.objects.filter(pk=world.tenant.pk).update(
        conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        applied_objects=["Namespace.core/-/tenant-x"], last_reconciled_at=clock.now() - timedelta(microseconds=7))
    world.quotas(2)
    Quota.objects.filter(pk=Quota.objects.order_by("pk").first().pk).update(borrowing_limit=None)
    first, second = world.invoices(2, lines=3)
    Invoice.objects.filter(pk=second.pk).update(replaces=first, opencost_cost=Decimal("1.23456"))
    second.lines.filter(position=1).update(adjusts=first, billed_unit_seconds=Decimal("12.5"))
    world.prices(2)
    return world


@pytest.mark.parametrize("serializer_class,rows", [
    (TenantSerializer, lambda: Tenant.objects.prefetch_related("memberships__user")),
    (MembershipSerializer, lambda: Membership.objects.select_related("user")),
    (MemberSerializer, lambda: Membership.objects.select_related("tenant", "user")),
    (QuotaSerializer, lambda: Quota.objects.select_related("tenant", "flavor")),
    (FlavorSerializer, lambda: Flavor.objects.select_related("gpu_model")),
    (InvoiceSerializer,
     lambda: Invoice.objects.select_related("tenant", "replaces").prefetch_related("lines__adjusts")),
    (InvoiceLineSerializer, lambda: Invoice.objects.order_by("-pk").first().lines.select_related("adjusts")),
    (PriceSerializer, lambda: Price.objects.select_related("flavor")),
], ids=lambda v: getattr(v, "__name__", ""))
def test_compiled_output_is_drf_output(monkeypatch, serializer_class, rows) -> None:
    _world()
    objects = list(rows())
    assert objects
    fast = serializer_class(objects, many=True).data
    assert fast == _drf(monkeypatch, serializer_class, objects)
    # Same types too (a Decimal string stays a string, None stays None, dates are the same text).
    assert [{k: type(v) for k, v in row.items()} for row in fast] == \
        [{k: type(v) for k, v in row.items()} for row in _drf(monkeypatch, serializer_class, objects)]


def test_a_missing_relation_takes_the_fields_default() -> None:
    """`replaces.number` with no replaced invoice: DRF's default (None), not an AttributeError."""
    world = _world()
    invoice = Invoice.objects.select_related("tenant", "replaces").get(pk=world.invoice().pk)
    assert invoice.replaces is None
    assert InvoiceSerializer(invoice).data["replaces"] is None


def _paged(queryset, serializer_class):  # type: ignore[no-untyped-def]
    """Rows as a cursor page gets them: the clones of filter, order_by and slicing."""
    return as_rows(queryset, row_lookups(serializer_class)).filter(pk__gt=0).order_by("pk")[:100]


def _rows_world() -> World:
    world = _world()
    # NULL relations in the rows: every line but one adjusts no invoice (checked, the test needs both).
    assert InvoiceLine.objects.filter(adjusts=None).exists() and InvoiceLine.objects.exclude(adjusts=None).exists()
    return world


@pytest.mark.parametrize("serializer_class,models,rows", [
    (QuotaSerializer, lambda: Quota.objects.select_related("tenant", "flavor", "cluster").order_by("pk"),
     lambda: _paged(Quota.objects.all(), QuotaSerializer)),
    (MembershipSerializer, lambda: Membership.objects.select_related("user").order_by("pk"),
     lambda: _paged(Membership.objects.all(), MembershipSerializer)),
    (InvoiceLineSerializer, lambda: InvoiceLine.objects.select_related("adjusts").order_by("pk"),
     lambda: _paged(InvoiceLine.objects.all(), InvoiceLineSerializer)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_rows_give_the_models_answer(monkeypatch, serializer_class, models, rows) -> None:
    """Rows of the columns shown (prefetch.as_rows) serialize exactly as DRF serializes the model objects,
    NULL relations included (a line that adjusts no invoice: `adjusts_invoice` null), and after the
    clones pagination makes (filter, order_by, slicing)."""
    _rows_world()
    expected = _drf(monkeypatch, serializer_class, list(models()))
    assert expected
    assert serializer_class(list(rows()), many=True).data == expected


@pytest.mark.parametrize("serializer_class,related,child,rows,children", [
    (TenantSerializer, "memberships", MembershipSerializer, lambda: Tenant.objects.order_by("pk"), member_rows),
    (InvoiceSerializer, "lines", InvoiceLineSerializer,
     lambda: Invoice.objects.select_related("tenant", "replaces").order_by("pk"), InvoiceLine.objects.all),
], ids=lambda v: getattr(v, "__name__", ""))
def test_attached_rows_give_the_prefetched_answer(monkeypatch, serializer_class, related, child, rows,
                                                  children) -> None:
    """A page with its children attached as rows (prefetch.attach_rows, with the children's queryset the
    views use) answers as with prefetched models, in the model's order."""
    world = _rows_world()
    world.members(world.tenant, 2)  # 5 members: their order shows
    parents = list(rows())
    expected = _drf(monkeypatch, serializer_class,
                    list(rows().prefetch_related(f"{related}__{'user' if related == 'memberships' else 'adjusts'}")))
    attach_rows(parents, related, children(), row_lookups(child))
    assert any(getattr(p, related).all() for p in parents)
    assert serializer_class(parents, many=True).data == expected


def test_rows_refuse_a_serializer_that_needs_the_model() -> None:
    with pytest.raises(ValueError, match="is not a column"):
        row_lookups(TenantSerializer)  # namespace, synced (properties), memberships (nested)


def test_a_partial_serializer_keeps_drfs_rules(monkeypatch) -> None:
    """Under `partial=True` DRF skips a default instead of answering it: such a serializer gets its own
    plan (never the shared one, whose missing relations answer the default)."""
    world = _world()
    invoice = Invoice.objects.select_related("tenant", "replaces").get(pk=world.invoice().pk)
    InvoiceSerializer(invoice).data  # a shared plan exists first
    with monkeypatch.context() as patched:
        patched.setattr(CompiledRepresentation, "to_representation", serializers.Serializer.to_representation)
        expected = InvoiceSerializer(invoice, partial=True).data
    assert "replaces" not in expected
    assert InvoiceSerializer(invoice, partial=True).data == expected


def test_tenant_rows_with_attached_members_give_the_models_answer(monkeypatch) -> None:
    """The tenant list's page: rows of every column with the model's properties (model_rows), members
    attached as rows -- exactly DRF's answer on Tenant objects with prefetched memberships."""
    world = _rows_world()
    world.members(world.tenant, 2)
    expected = _drf(monkeypatch, TenantSerializer,
                    list(Tenant.objects.order_by("pk").prefetch_related("memberships__user")))
    lookups, row_class = model_rows(TenantSerializer)
    page = list(as_rows(Tenant.objects.all(), lookups, row_class).filter(pk__gt=0).order_by("pk")[:100])
    attach_rows(page, "memberships", member_rows(), row_lookups(MembershipSerializer), parent_model=Tenant)
    assert any(row._prefetched_objects_cache["memberships"] for row in page)
    assert TenantSerializer(page, many=True).data == expected
