"""The measurer keeps seconds as exact integer milliseconds until it builds the samples; these check
that the integers give exactly the Decimals the Decimal arithmetic gave (value and exponent)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

from billing.metering.usage import (
    HAMI,
    SECONDS_QUANTUM,
    FlavorSpec,
    _round_half_even,
    _seconds,
    _weight_ratio,
    measure_report,
)

WEIGHTS = [Decimal(w) for w in ("1", "0.4286", "0.25", "2", "1.5", "2E+1", "0.125", "0.3333333", "7")]


def test_weights_split_exactly_into_numerator_and_power_of_ten() -> None:
    for weight in WEIGHTS:
        numerator, denominator = _weight_ratio(weight)
        assert Decimal(numerator) / Decimal(denominator) == weight
        assert str(denominator).rstrip("0") == "1"


def test_rounding_of_weighted_milliseconds_matches_decimal_quantize() -> None:
    rng = random.Random(14)
    cases = [[30_000] * count for count in (1, 7, 120)]  # whole slots
    cases += [[rng.randrange(1, 10**8) for _ in range(rng.randrange(1, 30))] for _ in range(3000)]
    cases += [[5], [15], [25], [1250], [3750]]  # ties once x 0.4286 / 0.125 / ...
    for weight in WEIGHTS:
        numerator, denominator = _weight_ratio(weight)
        for parts in cases:
            exact = sum((_seconds(ms) * weight for ms in parts), Decimal(0)).quantize(SECONDS_QUANTUM)
            got = _seconds(_round_half_even(sum(ms * numerator for ms in parts), denominator))
            assert got == exact and str(got) == str(exact), (weight, parts)


def test_ties_round_to_even() -> None:
    assert [_round_half_even(n, 10) for n in (5, 15, 25, 14, 16, -5, -15)] == [0, 2, 2, 1, 2, 0, -2]


def test_samples_carry_three_decimal_places_like_the_decimal_sums() -> None:
    """One answer per query kind, straight through measure_report: a MIG weight and a HAMi share."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    stamp = Decimal(int((start + timedelta(hours=1)).timestamp()))

    class Answers:
        def range(self, query, begin, end, step):  # type: ignore[no-untyped-def]
            if "vgpu" in query.lower() or "hami" in query.lower():
                return [SimpleNamespace(labels={"namespace": "tenant-a", "device_type": "NVIDIA-H100"},
                                        samples=((stamp, Decimal("0.3333333333")),))]
            return []

    flavors = [FlavorSpec("h100-q", HAMI, "H100", Decimal("0.25"))]
    report = measure_report(Answers(), flavors, start, start + timedelta(hours=1), method="per-slot")
    seconds = (Decimal("0.3333333333") * 30).quantize(SECONDS_QUANTUM)
    assert [(s.unit_seconds, str(s.unit_seconds), str(s.gpu_equivalent_seconds)) for s in report.samples] == [
        (seconds, str(seconds), str(seconds))]
