"""Figures on billing pages as a person writes them: "1,320 GPU-hours \N{MULTIPLICATION SIGN} 1.10 USD", not
"1320.000000 unit-hours at 1.100000". Stored values keep their full precision; only the page rounds."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from django import template

from gpufleet.core import sharing

register = template.Library()

# What one unit-hour of each flavor mode is called (the sharing-mode registry's words).
UNIT_HOURS = {m.name: m.unit_hours for m in sharing.MODES}


def _decimal(value: Any) -> Decimal | None:
    if value is None or value == "":
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def quantity_text(value: Any, places: int = 3) -> str:
    """1320.000000 -> "1,320"; 12.3456 -> "12.346"; trailing zeros dropped."""
    number = _decimal(value)
    if number is None:
        return "—"
    rounded = number.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    text = f"{rounded:,.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def money_text(value: Any) -> str:
    """At least two decimals, more only when the value has them: 1.100000 -> "1.10", 0.123400 -> "0.1234"."""
    number = _decimal(value)
    if number is None:
        return "—"
    exponent = number.normalize().as_tuple().exponent
    places = max(2, -exponent) if isinstance(exponent, int) else 2
    return f"{number:,.{places}f}"


@register.filter
def quantity(value: Any) -> str:
    return quantity_text(value)


@register.filter
def money(value: Any) -> str:
    return money_text(value)


@register.simple_tag
def line_reads(line: Any, currency: str) -> str:
    """One invoice line's arithmetic: "1,320 GPU-hours \N{MULTIPLICATION SIGN} 1.10 USD"."""
    mode = getattr(getattr(line, "flavor", None), "mode", "")
    unit = UNIT_HOURS.get(mode, "GPU-hours")
    return f"{quantity_text(line.quantity)} {unit} \N{MULTIPLICATION SIGN} {money_text(line.unit_price)} {currency}"
