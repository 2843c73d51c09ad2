"""DATABASES from a URL: PostgreSQL only.

gpufleet runs on one database engine, PostgreSQL (issue 25: a second engine was a second product nobody ran).
Anything else stops start-up here, in one line that names PostgreSQL and how to get one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

# What `make test` and a developer's machine use when DATABASE_URL is unset: the local server, trust auth.
LOCAL_URL = "postgres://postgres@127.0.0.1:5432/gpufleet"
POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}


def database_settings(url: str, conn_max_age: int = 60) -> dict[str, Any]:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in POSTGRES_SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL={scheme}:… is not PostgreSQL: gpufleet runs on PostgreSQL only; "
            "set DATABASE_URL=postgres://user@host:5432/dbname, or leave it unset for the demo's embedded PostgreSQL"
        )
    return dj_database_url.parse(url, conn_max_age=conn_max_age)
