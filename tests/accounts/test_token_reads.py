"""API tokens read by raw SQL (gpufleet/accounts/tokens.py): every use answers, and every datetime is aware.

The bug this guards against: on the embedded default a token answered 200 once, then 500 on every later
call (`can't subtract offset-naive and offset-aware datetimes`): the one-statement lookup builds the token
with `Model.from_db`, which skips field converters, and the engine then returned `last_used_at` naive.
PostgreSQL is now the only engine; these tests pin the behaviour on it for every raw-SQL reader.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import connection, models
from django.utils import timezone

from gpufleet.accounts.models import ApiToken, hash_secret
from gpufleet.accounts.tokens import LAST_USED_RESOLUTION, find_active_token
from tests.support import factories
from tests.support.clock import MID_NOVEMBER_2026
from tests.support.services import REPO
from tests.tenants.test_tokens import factories_client

pytestmark = pytest.mark.django_db

PRODUCT_DIRS = ("platform", "tenants", "scheduling", "billing", "infra")
# Every product module that builds model instances from raw rows (`Model.from_db`), and so bypasses the
# ORM's converters: each is exercised by test_raw_sql_readers_return_aware_datetimes below.
RAW_SQL_READERS = {"platform/gpufleet/accounts/tokens.py"}


def _create_token(api, **fields) -> str:
    owner = factories.user("alice")
    factories.tenant("team-a", owner=owner)
    api.force_authenticate(owner)
    created = api.post("/api/v1/tokens/", {"name": "ci", **fields}, format="json")
    assert created.status_code == 201, created.content
    api.force_authenticate(None)
    return created.json()["token"]


def test_a_token_answers_every_call_across_its_last_used_writes(api):
    with time_machine.travel(MID_NOVEMBER_2026, tick=False) as traveller:
        bearer = factories_client(_create_token(api))
        statuses = []
        for _ in range(10):
            statuses.append(bearer.get("/api/v1/tenants/").status_code)
            # 45 s apart: every other call is past LAST_USED_RESOLUTION and writes last_used_at, and the
            # next one compares against what was written.
            traveller.shift(timedelta(seconds=45))
        assert statuses == [200] * 10
        used = ApiToken.objects.get().last_used_at
        assert timezone.is_aware(used)
        assert timezone.now() - used <= LAST_USED_RESOLUTION + timedelta(seconds=45)


def test_an_expired_token_is_refused_every_time_not_500(api):
    with time_machine.travel(MID_NOVEMBER_2026, tick=False) as traveller:
        secret = _create_token(api, expires_at=(timezone.now() + timedelta(hours=1)).isoformat())
        bearer = factories_client(secret)
        assert [bearer.get("/api/v1/tenants/").status_code for _ in range(3)] == [200] * 3
        traveller.shift(timedelta(hours=1, seconds=1))
        assert [bearer.get("/api/v1/tenants/").status_code for _ in range(3)] == [401] * 3


def test_a_revoked_token_is_refused_every_time_not_500(api):
    secret = _create_token(api)
    bearer = factories_client(secret)
    assert [bearer.get("/api/v1/tenants/").status_code for _ in range(3)] == [200] * 3
    api.force_authenticate(ApiToken.objects.get().user)
    assert api.delete(f"/api/v1/tokens/{ApiToken.objects.get().pk}/").status_code == 204
    assert [bearer.get("/api/v1/tenants/").status_code for _ in range(3)] == [401] * 3


def _datetimes(instance: models.Model) -> dict[str, object]:
    return {f.name: getattr(instance, f.attname) for f in instance._meta.concrete_fields
            if isinstance(f, models.DateTimeField)}


def test_raw_sql_readers_return_aware_datetimes(api):
    secret = _create_token(api, expires_at=(timezone.now() + timedelta(days=1)).isoformat())
    assert factories_client(secret).get("/api/v1/tenants/").status_code == 200  # sets last_used_at
    token = find_active_token(hash_secret(secret), timezone.now())
    assert token is not None
    for instance in (token, token.user):
        values = _datetimes(instance)
        assert values, f"{type(instance).__name__} has datetime fields to check"
        naive = {name: value for name, value in values.items() if value is not None and timezone.is_naive(value)}
        assert not naive, f"{type(instance).__name__} read naive datetimes by raw SQL: {naive}"
    assert token.last_used_at is not None and token.expires_at is not None and token.user.date_joined is not None
    # And the connection itself: a timestamptz from any raw statement comes back aware, in UTC.
    with connection.cursor() as cursor:
        cursor.execute("SELECT now(), TIMESTAMPTZ '2026-07-01 12:00:00+02'")
        for value in cursor.fetchone():
            assert timezone.is_aware(value) and value.utcoffset() == timedelta(0)


def test_every_raw_sql_model_reader_is_covered_by_the_test_above():
    found = set()
    for top in PRODUCT_DIRS:
        for path in (REPO / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            if re.search(r"\.from_db\(", path.read_text(encoding="utf-8")):
                found.add(str(Path(path).relative_to(REPO)))
    assert found == RAW_SQL_READERS, (
        "a module builds models from raw rows: add it to RAW_SQL_READERS and to "
        "test_raw_sql_readers_return_aware_datetimes"
    )
