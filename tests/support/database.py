"""The test database's URL for a child process (a worker, a lock holder) from Django's connection settings.

The host may be a Unix socket directory (the embedded PostgreSQL: `make test DB=embedded`); in a URL it goes
percent-encoded, which libpq and dj-database-url both read back.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def database_url(settings_dict: dict[str, Any]) -> str:
    user = settings_dict.get("USER") or "postgres"
    auth = quote(user, safe="") + (f":{quote(settings_dict['PASSWORD'], safe='')}" if settings_dict.get("PASSWORD")
                                   else "")
    host = quote(str(settings_dict.get("HOST") or "127.0.0.1"), safe="")
    return f"postgres://{auth}@{host}:{settings_dict.get('PORT') or 5432}/{settings_dict['NAME']}"
