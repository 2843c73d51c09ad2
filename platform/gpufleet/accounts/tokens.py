"""DRF authentication with `Authorization: Bearer gpf_…` API tokens."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connections, router
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from gpufleet import clock
from gpufleet.api.dataversion import VERSION_SQL

from .models import TOKEN_PREFIX, ApiToken, hash_secret
from .roles import PLATFORM_ROLES, remember_roles

BEARER = re.compile(r"([!-~]+) +([!-~]+)", re.ASCII)
WHITESPACE = " \t\u00a0\u0085"

# Writing last_used_at on every request would turn every read into a write; once a minute is plenty.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@cache
def _lookup_sql() -> tuple[str, list[str], list[str]]:
    """One statement for the whole lookup: the active token with that digest, its user (every column,
    as `select_related` loaded it), an EXISTS per platform role and the fleet's data version
    (gpufleet/api/dataversion.py), which the API's answer cache keys answers by: a cached read then costs
    this one query.

    Written once from the models' metadata rather than through the ORM per request: building and
    compiling that queryset (joins, the Q of `active()`, two annotated subqueries) cost more CPU than the
    rest of a small API read (benchmarks/README.md, "API"). Same rows as `ApiToken.objects.active()`:
    not revoked, not expired at `now`.
    """
    # Only identifiers from the models' metadata go into the text; every value is a parameter.
    user_model = get_user_model()
    token_cols = [f.attname for f in ApiToken._meta.concrete_fields]
    user_cols = [f.attname for f in user_model._meta.concrete_fields]
    membership = user_model._meta.get_field("groups").remote_field.through._meta
    member_user = membership.get_field("user").column
    member_group = membership.get_field("group").column
    role = (f'EXISTS (SELECT 1 FROM "{membership.db_table}" ug JOIN "{Group._meta.db_table}" g '  # noqa: S608
            f'ON g."{Group._meta.pk.column}" = ug."{member_group}" '
            f'WHERE ug."{member_user}" = u."{user_model._meta.pk.column}" AND g."name" = %s)')
    columns = ([f't."{ApiToken._meta.get_field(a).column}"' for a in token_cols]
               + [f'u."{user_model._meta.get_field(a).column}"' for a in user_cols]
               + [role] * len(PLATFORM_ROLES)
               + [f"({VERSION_SQL})"])
    user_fk = ApiToken._meta.get_field("user").column
    sql = (f'SELECT {", ".join(columns)} FROM "{ApiToken._meta.db_table}" t '  # noqa: S608
           f'JOIN "{user_model._meta.db_table}" u ON u."{user_model._meta.pk.column}" = t."{user_fk}" '
           f'WHERE t."digest" = %s AND t."revoked_at" IS NULL '
           f'AND (t."expires_at" IS NULL OR t."expires_at" > %s) LIMIT 1')
    return sql, token_cols, user_cols


def find_active_token(digest: str, now: datetime) -> ApiToken | None:
    """The active token with `digest` (user loaded, its platform roles remembered), or None."""
    db = router.db_for_read(ApiToken)
    sql, token_cols, user_cols = _lookup_sql()
    with connections[db].cursor() as cursor:
        cursor.execute(sql, [*PLATFORM_ROLES, digest, now])
        row = cursor.fetchone()
    if row is None:
        return None
    n_token, n_user = len(token_cols), len(user_cols)
    token = ApiToken.from_db(db, token_cols, row[:n_token])
    user: Any = get_user_model().from_db(db, user_cols, row[n_token:n_token + n_user])
    ApiToken._meta.get_field("user").set_cached_value(token, user)
    held = row[n_token + n_user:n_token + n_user + len(PLATFORM_ROLES)]
    remember_roles(user, {role for role, has in zip(PLATFORM_ROLES, held, strict=True) if has})
    # Read in the same statement as the token: the version the data read after it is at least as new as.
    token.data_version = row[-1]  # type: ignore[attr-defined]
    return token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[object, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        # RFC 9110 §11.6.2/§11.4: the scheme, one or more SP (0x20), the credentials in visible ASCII. Not
        # str.split(): it also splits on NBSP (U+00A0, the byte A0 as WSGI's latin-1 hands it over) and U+0085,
        # so "Bearer<NBSP>gpf_..." authenticated although no HTTP parser reads it as a Bearer credential.
        match = BEARER.fullmatch(header.strip(" \t"))  # a field value's own leading/trailing OWS only
        if match is None or match[1] != self.keyword or not match[2].startswith(TOKEN_PREFIX):
            if header.lstrip(WHITESPACE).startswith(self.keyword):  # ours, but not readable: refused, not ignored
                raise exceptions.AuthenticationFailed(
                    "malformed Authorization header: 'Bearer', a space, then the token")
            return None
        parts = [match[1], match[2]]
        # The user's platform roles come with the token, so the views' role checks (roles.has_role) cost
        # no query of their own: one query authenticates a read.
        now = clock.now()
        token = find_active_token(hash_secret(parts[1]), now)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked API token")
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
