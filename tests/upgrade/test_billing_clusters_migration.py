"""Issue 9 upgrade path for billing: migration billing 0004 puts existing usage on cluster `default`, keeps
every price an every-cluster price, and leaves finalized invoices byte for byte as they were (their lines get
no cluster, so their content hash still verifies). Runs the real migrations backwards and forwards."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("billing", "0003_usage_without_redundant_fk_indexes"), ("scheduling", "0007_sync_run_repository"),
          ("tenants", "0003_seed_allocation_policy")]
AFTER = [("billing", "0004_clusters")]


def _migrate(targets):  # type: ignore[no-untyped-def]
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _line_row(pk: int) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute("SELECT position, kind, flavor_name, description, quantity, unit_price, amount, unit_seconds "
                       "FROM billing_invoiceline WHERE id = %s", [pk])
        return cursor.fetchone()


@pytest.mark.django_db(transaction=True)
def test_usage_moves_to_default_and_finalized_invoices_stay_untouched() -> None:
    old = _migrate(BEFORE)
    try:
        tenant = old.get_model("tenants", "Tenant").objects.create(slug="acme", display_name="Acme",
                                                                   trust_level="standard", phase="ready")
        model = old.get_model("scheduling", "GpuModel").objects.create(name="h100", dcgm_model_name="H100",
                                                                       memory_mib=81559)
        flavor = old.get_model("scheduling", "Flavor").objects.create(name="h100", gpu_model=model, mode="whole",
                                                                      capacity=8)
        hour = datetime(2026, 9, 3, 10, tzinfo=UTC)
        old.get_model("billing", "UsageRecord").objects.create(
            tenant=tenant, flavor=flavor, hour=hour, unit_seconds=Decimal(3600), gpu_equivalent_seconds=Decimal(3600),
            collected_at=hour, window_start=hour, window_end=hour)
        price = old.get_model("billing", "Price").objects.create(flavor=flavor, currency="USD",
                                                                 per_unit_hour=Decimal("2.50"),
                                                                 effective_from=date(2026, 1, 1))
        Invoice = old.get_model("billing", "Invoice")
        invoice = Invoice.objects.create(tenant=tenant, period=date(2026, 9, 1), currency="USD",
                                         subtotal=Decimal("2.50"), total=Decimal("2.50"))
        line = old.get_model("billing", "InvoiceLine").objects.create(
            invoice=invoice, position=1, kind="usage", flavor=flavor, flavor_name="h100",
            description="h100: 1.000000 unit-hours at 2.500000 USD/unit-hour", charge_start=hour, charge_end=hour,
            quantity=Decimal(1), unit_price=Decimal("2.5"), amount=Decimal("2.50"), unit_seconds=Decimal(3600),
            gpu_equivalent_seconds=Decimal(3600), price=price)
        Invoice.objects.filter(pk=invoice.pk).update(state="finalized", number="GF-2026-000001", number_year=2026,
                                                     number_seq=1)
        before = _line_row(line.pk)

        new = _migrate(AFTER)
        default = new.get_model("scheduling", "Cluster").objects.get(name="default")
        usage = new.get_model("billing", "UsageRecord").objects.get()
        assert usage.cluster_id == default.pk
        assert new.get_model("billing", "Price").objects.get().cluster_id is None
        migrated = new.get_model("billing", "InvoiceLine").objects.get()
        assert (migrated.cluster_id, migrated.cluster_name, migrated.region, migrated.availability_zone) == (
            None, "", "", "")
        assert _line_row(line.pk) == before
        assert new.get_model("billing", "Invoice").objects.get().state == "finalized"
        # The previous release's collector inserts without the column: the database default is `default`.
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO billing_usagerecord (tenant_id, flavor_id, hour, unit_seconds, gpu_equivalent_seconds, "
                "collected_at, window_start, window_end) VALUES (%s, %s, %s, 60, 60, now(), now(), now()) "
                "RETURNING cluster_id", [tenant.pk, flavor.pk, datetime(2026, 9, 3, 11, tzinfo=UTC)])
            assert cursor.fetchone()[0] == default.pk
    finally:
        with connection.cursor() as cursor:  # the finalized invoice would block the table flush
            cursor.execute("ALTER TABLE billing_invoice DISABLE TRIGGER USER")
            cursor.execute("ALTER TABLE billing_invoiceline DISABLE TRIGGER USER")
            cursor.execute("DELETE FROM billing_invoiceline")
            cursor.execute("DELETE FROM billing_invoice")
            cursor.execute("ALTER TABLE billing_invoice ENABLE TRIGGER USER")
            cursor.execute("ALTER TABLE billing_invoiceline ENABLE TRIGGER USER")
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
