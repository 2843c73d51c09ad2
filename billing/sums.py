"""ExactSum: SUM over a DecimalField that stays exact on every database.

PostgreSQL sums `numeric` exactly. SQLite (the embedded demo, and the `gpufleet` CLI's default
profile) has no decimal type: it stores and sums such columns as binary doubles, so a month of
GPU-seconds can come back as 678902.400000001. Summing the values scaled to integers is exact there
(SQLite integers are 64-bit: 10^15 seconds at millisecond resolution fit), and the result is scaled
back to a Decimal with the column's decimal places.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import DecimalField, Sum

from .models import SECONDS


class ExactSum(Sum):
    def __init__(self, expression: Any, places: int = SECONDS["decimal_places"], **extra: Any) -> None:
        self.places = places
        super().__init__(expression, output_field=DecimalField(max_digits=32, decimal_places=places), **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, list[Any]]:
        scale = 10**self.places
        return self.as_sql(
            compiler, connection, template=f"SUM(CAST(ROUND(%(expressions)s * {scale}) AS INTEGER))", **extra_context
        )

    def get_db_converters(self, connection: Any) -> list[Any]:
        converters = super().get_db_converters(connection)
        if connection.vendor == "sqlite":
            converters.append(self._unscale)
        return converters

    def _unscale(self, value: Any, expression: Any, connection: Any) -> Decimal | None:
        if value is None:
            return None
        return (Decimal(int(value)).scaleb(-self.places)).quantize(Decimal(1).scaleb(-self.places))
