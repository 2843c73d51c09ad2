"""Property: whatever a client sends to a write route, the answer is never a 5xx, and a 4xx changes nothing.

Hypothesis generates bodies for every write route from the route's own OpenAPI request schema (so a new
field is covered without editing this file): each known field missing, or a value of the wrong type, a
huge/negative/odd number, an odd string (control characters, Unicode spaces, look-alikes, exponents,
digit separators, far dates and months), a nested value; plus bodies that are not objects at all.
On a 4xx, the database (every model's row count, the audit trail) and the GitOps repository (HEAD,
work tree, files) must be exactly as before. Runs derandomized: the same inputs on every run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet import clock

from .conftest import snapshot, write_routes

pytestmark = pytest.mark.django_db

ODD_STRINGS = [
    "", " ", "\n", "\t", "\x00", "a\x00b", "\u00a0", "\u0085", "\u2028", "\ufeff", "abc\n", "acme\n", "ACME",
    "acme ", "\u0430cme", "h100\n", "-1", "-0", "0", "1e12", "1E+400", "1_000", "Infinity", "-Infinity", "NaN",
    "1" * 40, "0.0000001", "9" * 20 + ".5", "9999-12-31", "0000-01-01", "0000-01", "9999-12", "2026-13",
    "2026-02-30", "../../etc/passwd", "%00", "{{7*7}}", "<script>alert(1)</script>", "'; DROP TABLE x; --",
    "x" * 5000, "\ud7ff", "\U0001f600", "\u202e", "true", "null",
]
# Plausible values too, so that generation reaches the deeper rules (quota capacity, overlapping prices...).
PLAUSIBLE = ["acme", "newbie", "h100", "h100-80gb", "standard", "trusted", "untrusted", "whole", "USD", "EUR",
             "2026-12", "2026-12-01", "2.50", "1", "viewer", "admin", "owner"]

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e12, -0.0, 1e308, 5e-324, 0.1]),
    st.text(max_size=40),
    st.sampled_from(ODD_STRINGS),
    st.sampled_from(PLAUSIBLE),
)
value = st.recursive(leaf, lambda children: st.one_of(st.lists(children, max_size=3),
                                                      st.dictionaries(st.text(max_size=8), children, max_size=3)),
                     max_leaves=6)


def _request_fields(schema: dict[str, Any], method: str, path: str) -> list[str]:
    template = path
    for part in path.strip("/").split("/"):
        if part.isdigit():
            template = template.replace(f"/{part}/", "/{id}/", 1)
    template = template.replace("/standard/", "/{trust_level}/")
    operation = schema["paths"][template][method]
    ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    name = ref.get("$ref", "").rsplit("/", 1)[-1]
    properties = schema["components"]["schemas"].get(name, {}).get("properties", {})
    return sorted(field for field, spec in properties.items() if not spec.get("readOnly"))


# A valid value per field (where one is needed to get past the first check): the generator keeps most of
# them and breaks or drops a few, so it reaches the rules behind the first field too.
VALID: dict[str, Any] = {
    "slug": "fresh", "trust_level": "standard", "display_name": "Fresh team", "reason": "because",
    "allowed_modes": ["whole"], "egress_cidrs": ["10.0.0.0/8"], "egress_fqdns": ["example.com"],
    "name": "fresh", "expires_at": f"{clock.today().year + 1}-06-01T00:00:00Z", "world_egress": False,
    "flavor": "h100",
    "gpu_limit": 8, "instance_types": ["p5.48xlarge"], "capacity_types": ["on-demand"],
    "consolidation_policy": "WhenEmpty", "consolidate_after": "5m", "allow_underutilized": False,
    "tenant": "acme", "model": "meta-llama/Llama-3.1-8B", "tier": "standard", "deployment": "llm",
    "queue_target": 5, "kv_cache_target": 0.8, "triggers": [], "cohort": "gpufleet",
    "fair_sharing_weight": 1, "priority_class": "", "comment": "ok", "nominal": 1, "borrowing_limit": 0,
    "lending_limit": 0, "per_unit_hour": "2.75", "currency": "USD", "effective_from": "2026-12-01",
    "period": "2026-10",
}


# Numbers and dates as text: the values that overflowed columns and calendars before.
ODD_NUMBERS_AND_DATES = ["-0", "1e12", "1E+400", "1_000", "Infinity", "NaN", "1" * 40, "0.0000001", "9999-12-31",
                         "0000-01-01", "0000-01", "9999-12", "2026-13", "2026-02-30", "99999-01"]
odd_scalar = st.one_of(
    st.sampled_from(ODD_NUMBERS_AND_DATES),
    st.sampled_from(ODD_STRINGS),
    st.sampled_from([0, -1, -0.0, 1e12, 1e308, 2**63, -(2**63) - 1, 10**30, 0.1, True, False, None]),
    st.sampled_from(PLAUSIBLE),
)


@st.composite
def bodies(draw: st.DrawFn, fields: list[str]) -> Any:
    mode = draw(st.integers(0, 9))
    if mode == 0:  # not an object at all
        return draw(st.one_of(leaf, st.lists(leaf, max_size=3)))
    valid = {field: VALID[field] for field in fields if field in VALID}
    if mode < 4 and fields:  # everything valid but one number or date as text: overflows, calendars
        return {**valid, draw(st.sampled_from(fields)): draw(st.sampled_from(ODD_NUMBERS_AND_DATES))}
    if mode < 6 and fields:  # everything valid but one field: reaches the rule behind that field
        return {**valid, draw(st.sampled_from(fields)): draw(st.one_of(odd_scalar, value))}
    body: dict[str, Any] = {}
    for field in fields:
        choice = draw(st.integers(0, 9))
        if choice < 5 and field in VALID:  # keep a valid value
            body[field] = VALID[field]
        elif choice < 7:  # leave the field out
            continue
        else:  # a wrong type, an odd number or string, a nested value, a plausible but wrong value
            body[field] = draw(st.one_of(odd_scalar, value))
    return body


ROUTES = 15


@pytest.mark.parametrize("route", range(ROUTES))
def test_no_5xx_and_a_4xx_changes_nothing(world, gitops_repo: Path, route: int) -> None:
    routes = write_routes(world)
    assert len(routes) == ROUTES
    method, path = routes[route]
    client = world["client"]
    schema = yaml.safe_load(client.get("/api/v1/schema/").content)
    fields = _request_fields(schema, method, path)
    if method == "patch" or path.endswith(("/approve/", "/reject/")):
        assert fields or path.endswith("/approve/"), (method, path)

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(body=bodies(fields))
    def check(body: Any) -> None:
        before = snapshot(gitops_repo)
        try:
            text = json.dumps(body)
        except (ValueError, TypeError):
            return
        # Every example starts from the same world: its writes are rolled back after it.
        with transaction.atomic():
            response = getattr(client, method)(path, text, content_type="application/json")
            assert response.status_code < 500, (method, path, body, response.status_code, response.content[:500])
            if 400 <= response.status_code < 500:
                assert snapshot(gitops_repo) == before, (method, path, body, response.status_code)
                payload = response.json()
                assert isinstance(payload.get("errors"), list) and payload["errors"], payload
                assert all({"field", "reason"} <= set(e) for e in payload["errors"]), payload
            transaction.set_rollback(True)

    check()
