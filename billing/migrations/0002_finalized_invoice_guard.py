"""A database-level guard: finalized invoices and their lines cannot change by any path.

The model and queryset refuse such writes in Python; this trigger also refuses raw SQL and other
clients. Allowed: a finalized invoice may become void (state, voided_at, void_reason only).
"""

from django.db import migrations

GUARD_SQL = r"""
CREATE OR REPLACE FUNCTION billing_invoice_guard() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.state <> 'draft' THEN
      RAISE EXCEPTION 'invoice % is % and cannot be deleted', OLD.number, OLD.state;
    END IF;
    RETURN OLD;
  END IF;
  IF OLD.state = 'void' THEN
    RAISE EXCEPTION 'invoice % is void and cannot be changed', OLD.number;
  END IF;
  IF OLD.state = 'finalized' THEN
    IF NEW.state <> 'void' OR (to_jsonb(NEW) - 'state' - 'voided_at' - 'void_reason')
                              <> (to_jsonb(OLD) - 'state' - 'voided_at' - 'void_reason') THEN
      RAISE EXCEPTION 'invoice % is finalized and cannot be changed (void and reissue instead)', OLD.number;
    END IF;
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION billing_invoiceline_guard() RETURNS trigger AS $$
DECLARE s text;
BEGIN
  SELECT state INTO s FROM billing_invoice
   WHERE id = (CASE WHEN TG_OP = 'INSERT' THEN NEW.invoice_id ELSE OLD.invoice_id END);
  IF s IS NOT NULL AND s <> 'draft' THEN
    RAISE EXCEPTION 'lines of a % invoice cannot be changed', s;
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.invoice_id <> OLD.invoice_id THEN
    SELECT state INTO s FROM billing_invoice WHERE id = NEW.invoice_id;
    IF s <> 'draft' THEN
      RAISE EXCEPTION 'lines cannot be moved onto a % invoice', s;
    END IF;
  END IF;
  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER billing_invoice_guard BEFORE UPDATE OR DELETE ON billing_invoice
  FOR EACH ROW EXECUTE FUNCTION billing_invoice_guard();
CREATE TRIGGER billing_invoiceline_guard BEFORE INSERT OR UPDATE OR DELETE ON billing_invoiceline
  FOR EACH ROW EXECUTE FUNCTION billing_invoiceline_guard();
"""

DROP_SQL = """
DROP TRIGGER IF EXISTS billing_invoiceline_guard ON billing_invoiceline;
DROP TRIGGER IF EXISTS billing_invoice_guard ON billing_invoice;
DROP FUNCTION IF EXISTS billing_invoiceline_guard();
DROP FUNCTION IF EXISTS billing_invoice_guard();
"""


def _run(sql):
    def apply(apps, schema_editor):
        schema_editor.execute(sql, params=None)

    return apply


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_usage_prices_invoices")]

    operations = [migrations.RunPython(_run(GUARD_SQL), _run(DROP_SQL))]
