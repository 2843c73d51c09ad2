"""scheduling.validation: every refusal branch names the field and says why (pure, no database)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling import validation


@pytest.mark.parametrize(("value", "optional", "expected", "reason"), [
    (None, False, None, "is required"),
    ("", False, None, "is required"),
    (None, True, None, None),
    (True, False, None, "must be a whole number"),
    (1.0, False, None, "must be a whole number"),
    ("1.5", False, None, "must be a whole number"),
    ("ten", False, None, "must be a whole number"),
    ([1], False, None, "must be a whole number"),
    (-1, False, None, "must not be negative"),
    ("-3", False, None, "must not be negative"),
    (1_000_001, False, None, "is implausibly large (at most 1000000)"),
    (0, False, 0, None),
    ("42", False, 42, None),
    (1_000_000, False, 1_000_000, None),
])
def test_count(value, optional, expected, reason) -> None:
    errors: dict[str, list[str]] = {}
    assert validation.count(value, "nominal", errors, optional=optional) == expected
    assert errors == ({"nominal": [reason]} if reason else {})


@pytest.mark.parametrize(("value", "default", "expected", "reason"), [
    (None, None, None, "is required"),
    ("", None, None, "is required"),
    (None, Decimal(1), Decimal(1), None),
    (True, None, None, "must be a number"),
    ("abc", None, None, "must be a number"),
    ("NaN", None, None, "must be between 0 and 10"),
    ("Infinity", None, None, "must be between 0 and 10"),
    ("-0.1", None, None, "must be between 0 and 10"),
    ("10.5", None, None, "must be between 0 and 10"),
    ("2.5", None, Decimal("2.5"), None),
    (3, None, Decimal(3), None),
])
def test_decimal(value, default, expected, reason) -> None:
    errors: dict[str, list[str]] = {}
    got = validation.decimal(value, "weight", errors, low=Decimal(0), high=Decimal(10), default=default)
    assert got == expected
    assert errors == ({"weight": [reason]} if reason else {})


@pytest.mark.parametrize(("value", "reason"), [
    (None, "must be a string, not NoneType"),
    (7, "must be a string, not a number"),
    ("", "is required"),
    ("Gpu", "must be lowercase"),
    ("-gpu", "must start and end with a letter or digit"),
    ("g" * 64, "must be at most 63 characters (got 64)"),
    ("gpu\n", "must not contain whitespace or control characters"),
    ("gp_u", "must be a DNS-1123 label"),
])
def test_name(value, reason) -> None:
    errors: dict[str, list[str]] = {}
    assert validation.name(value, "name", errors) == ""
    assert reason in errors["name"][0]
    ok: dict[str, list[str]] = {}
    assert validation.name("gpu-1", "name", ok) == "gpu-1" and ok == {}


@pytest.mark.parametrize(("value", "reason"), [
    ("k=v", "must be a mapping of label keys to values"),
    ({"bad key": "v"}, "must not contain whitespace"),
    ({"Example.com/x": "v"}, "the prefix must be a DNS subdomain"),
    ({"k": "bad-value!"}, "is not a valid label value"),
    ({"k": 3}, "must be a string, not a number"),
])
def test_labels(value, reason) -> None:
    errors: dict[str, list[str]] = {}
    validation.labels(value, "node_labels", errors)
    assert reason in errors["node_labels"][0]
    ok: dict[str, list[str]] = {}
    validation.labels({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "node_labels", ok)
    validation.labels(None, "node_labels", ok)
    assert ok == {}


def test_label_value_derived_from_a_product_name() -> None:
    assert validation.label_value("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert validation.label_value("  A100-SXM4 (80GB) ") == "A100-SXM4-80GB"
    assert len(validation.label_value("x" * 100)) == 63
