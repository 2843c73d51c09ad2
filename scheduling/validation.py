"""Input checks shared by the scheduling actions. Each returns field -> reasons; nothing is written."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def count(value: Any, field: str, errors: dict[str, list[str]], *, optional: bool = False) -> int | None:
    """A non-negative integer (ints or digit strings; never bools, floats or negative numbers)."""
    if value is None or value == "":
        if not optional:
            errors[field] = ["is required"]
        return None
    if isinstance(value, bool) or isinstance(value, float):
        errors[field] = ["must be a whole number"]
        return None
    if isinstance(value, str):
        if not re.fullmatch(r"-?\d+", value.strip()):
            errors[field] = ["must be a whole number"]
            return None
        value = int(value)
    if not isinstance(value, int):
        errors[field] = ["must be a whole number"]
        return None
    if value < 0:
        errors[field] = ["must not be negative"]
        return None
    if value > 1_000_000:
        errors[field] = ["is implausibly large (at most 1000000)"]
        return None
    return value


def decimal(value: Any, field: str, errors: dict[str, list[str]], *, low: Decimal, high: Decimal,
            default: Decimal | None = None) -> Decimal | None:
    if value is None or value == "":
        if default is None:
            errors[field] = ["is required"]
        return default
    if isinstance(value, bool):
        errors[field] = ["must be a number"]
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        errors[field] = ["must be a number"]
        return None
    if not number.is_finite() or not low <= number <= high:
        errors[field] = [f"must be between {low} and {high}"]
        return None
    return number


def name(value: Any, field: str, errors: dict[str, list[str]]) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        errors[field] = ["must be a DNS label: lowercase letters, digits and '-', at most 63 characters"]
        return ""
    return value


LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")
LABEL_KEY = re.compile(r"^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


def label_value(text: str) -> str:
    """The Kubernetes label value GPU feature discovery uses for a product name (spaces -> '-')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-._")[:63].strip("-._")


def labels(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        errors[field] = ["must be a mapping of label keys to values"]
        return
    for key, val in value.items():
        if not isinstance(key, str) or not LABEL_KEY.match(key):
            errors[field] = [f"{key!r} is not a valid label key"]
            return
        if not isinstance(val, str) or not LABEL_VALUE.match(val):
            errors[field] = [f"{val!r} (for {key}) is not a valid label value"]
            return
