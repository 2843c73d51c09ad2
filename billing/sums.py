"""ExactSum: SUM over a DecimalField, typed with the column's scale.

PostgreSQL sums `numeric` exactly; this aggregate only declares the result's type (a Decimal with the
GPU-second columns' decimal places), so every caller gets the same Decimal shape back.
"""

from __future__ import annotations

from typing import Any

from django.db.models import DecimalField, Sum

from .models import SECONDS


class ExactSum(Sum):
    def __init__(self, expression: Any, places: int = SECONDS["decimal_places"], **extra: Any) -> None:
        super().__init__(expression, output_field=DecimalField(max_digits=32, decimal_places=places), **extra)
