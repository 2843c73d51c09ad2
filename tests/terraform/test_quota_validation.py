"""A negative or fractional quota is refused at plan time (issue 28, item 6), before any resource of the
apply is created; values known only at apply are left to the API."""

from __future__ import annotations

from tf.types import Unknown
from tf.utils import Diagnostics

from gpufleet.terraform.scheduling import Quota


def _errors(config: dict) -> list[str]:
    diags = Diagnostics()
    Quota(provider=None).validate(diags, "gpufleet_quota", config)
    return [d.summary for d in diags.diagnostics]


def test_negative_or_fractional_units_are_refused_at_validate() -> None:
    base = {"tenant": "acme", "flavor": "a100", "nominal": 2, "borrowing_limit": None, "lending_limit": None}
    assert _errors(base) == []
    assert _errors({**base, "nominal": -1}) == ["nominal must be a whole number of units, 0 or more (got -1)"]
    assert _errors({**base, "borrowing_limit": 1.5})[0].startswith("borrowing_limit must be a whole number")
    assert _errors({**base, "nominal": Unknown}) == []  # known only at apply: the API checks it then
