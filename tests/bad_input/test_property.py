"""Property: whatever a client sends to a write route, the answer is never a 5xx, and a 4xx changes nothing.

Hypothesis generates bodies for every write route from the route's own OpenAPI request schema (so a new
field is covered without editing this file): each known field missing, or a value of the wrong type, a
huge/negative/odd number, an odd string (control characters, Unicode spaces, look-alikes, exponents,
digit separators, far dates and months), a nested value; plus bodies that are not objects at all.
On a 4xx, the database (every model's row count, the audit trail) and the GitOps repository (HEAD,
work tree, files) must be exactly as before. Runs derandomized: the same inputs on every run.

The routes are every POST/PATCH/PUT/DELETE operation of the published document (issue 27), and some bodies
must be refused whatever else they hold: a field the body does not list, a value of another JSON type than
the document's ("5" for an integer, 5 for a text), a NUL in any string, untrimmed single-line text (400
naming the field), and a body over the size limit (413).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet import clock

from .conftest import api_schema, concrete_path, snapshot

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


def _write_templates() -> list[tuple[str, str]]:
    """(method, path template) of every write operation in the document, read when the tests are collected."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted((method, template) for template, item in schema["paths"].items() for method in item
                  if method in ("post", "patch", "put", "delete"))


def _field_types(schema: dict[str, Any], body: dict[str, Any]) -> dict[str, str]:
    """Each writable field of a request body and the JSON type the document gives it ("" when any)."""
    components = schema["components"]["schemas"]
    out = {}
    for name, spec in body.get("properties", {}).items():
        while "$ref" in spec or len(spec.get("allOf", [])) == 1:
            spec = components[spec["$ref"].rsplit("/", 1)[-1]] if "$ref" in spec else spec["allOf"][0]
        if not spec.get("readOnly"):
            out[name] = spec.get("type", "")
    return out


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


# Values of another JSON type than the document's: each is refused, never coerced (issue 27 item 9).
WRONG_TYPE: dict[str, list[Any]] = {
    "integer": ["5", "\uff15", 5.0, True, "1e3", None], "number": ["0.5", "\uff15", True, "NaN"],
    "boolean": ["true", "false", 1, 0, "yes"], "string": [5, 0.5, True, ["x"], {"x": 1}],
    "array": ["x", {"x": 1}, 5], "object": ["x", [1], 5],
}
PROSE = {"reason", "comment", "note"}  # free text keeps its spaces (gpufleet.api.fields.Prose)
# What a body must get, whatever else it holds: (status, field named in the answer).
REFUSED, TOO_LARGE = 400, 413


@st.composite
def refused_bodies(draw: st.DrawFn, types: dict[str, str]) -> tuple[Any, int, str]:
    """A body with one thing no route takes, the answer it must get and the field that answer names."""
    fields = sorted(types)
    valid = {field: VALID[field] for field in fields if field in VALID}
    kind = draw(st.sampled_from(["unknown", "wrong_type", "nul", "edge", "too_large"]))
    typed = [f for f in fields if types[f] in WRONG_TYPE]
    texts = [f for f in fields if types[f] == "string"]
    if kind == "wrong_type" and typed:
        field = draw(st.sampled_from(typed))
        wrong = [v for v in WRONG_TYPE[types[field]] if v is not None]
        return {**valid, field: draw(st.sampled_from(wrong))}, REFUSED, field
    if kind == "nul" and fields:
        field = draw(st.sampled_from(fields))
        text = draw(st.sampled_from(["\x00", "a\x00b", "acme\x00", "\x00\x00"]))
        return {**valid, field: [text] if types[field] == "array" else text}, REFUSED, field if \
            types[field] != "array" else f"{field}[0]"
    if kind == "edge" and [f for f in texts if f not in PROSE]:
        field = draw(st.sampled_from([f for f in texts if f not in PROSE]))
        base = str(VALID.get(field) or "x")
        return {**valid, field: draw(st.sampled_from([f" {base}", f"{base} ", f"{base}\n", f"\u00a0{base}"]))}, \
            REFUSED, field
    if kind == "too_large":  # `padding` is made 1 MiB long when sent (a drawn 1 MiB string is unreadable)
        return {**valid, "padding": None}, TOO_LARGE, ""
    name = draw(st.text(min_size=1, max_size=12).filter(lambda n: n not in types and "\x00" not in n
                                                                    and n != "non_field_errors"))
    return {**valid, name: draw(odd_scalar)}, REFUSED, name


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


ROUTES = _write_templates()


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {t}" for m, t in ROUTES])
def test_no_5xx_and_a_4xx_changes_nothing(world, gitops_repo: Path, method: str, template: str) -> None:
    assert len(ROUTES) >= 30  # 26 with a body, and approve, finalize, DELETE... without one
    client = world["client"]
    path = concrete_path(world, template)
    schema = api_schema(client)
    operation = schema["paths"][template][method]
    ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    types = _field_types(schema, schema["components"]["schemas"].get(ref.get("$ref", "").rsplit("/", 1)[-1], {}))
    fields = sorted(types)
    if method == "patch" or template.endswith("/reject/"):
        assert fields, (method, template)
    # Node health acts through the Kubernetes API, which this world has none of: a valid request is a 503 there
    # (tests/nodehealth runs it against the emulator); its bad requests must still be refused first.
    unavailable_ok = template.startswith("/api/v1/node-health/")
    limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(case=st.one_of(bodies(fields).map(lambda body: (body, None, None)), refused_bodies(types)))
    def check(case: tuple[Any, int | None, str | None]) -> None:
        body, must, field = case
        before = snapshot(gitops_repo)
        try:
            text = json.dumps({**body, "padding": "x" * limit} if must == TOO_LARGE else body)
        except (ValueError, TypeError):
            return
        # Every example starts from the same world: its writes are rolled back after it.
        with transaction.atomic():
            response = getattr(client, method)(path, text, content_type="application/json")
            status = response.status_code
            assert status < 500 or (unavailable_ok and status == 503 and must is None), \
                (method, path, body, status, response.content[:500])
            if must is not None:
                named = [e["field"] for e in response.json()["errors"]] if 400 <= status < 500 else []
                assert status == must and field in named, (method, path, str(body)[:300], status, named, field)
            if 400 <= status < 500:
                assert snapshot(gitops_repo) == before, (method, path, str(body)[:300], status)
                payload = response.json()
                assert isinstance(payload.get("errors"), list) and payload["errors"], payload
                assert all({"field", "reason"} <= set(e) for e in payload["errors"]), payload
            transaction.set_rollback(True)

    check()
