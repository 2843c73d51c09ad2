"""OIDC endpoints from the issuer's discovery document (`<issuer>/.well-known/openid-configuration`).

Keycloak (`/protocol/openid-connect/auth`), Dex (`/auth`), Entra (`/oauth2/v2.0/authorize`) and Okta
(`/v1/authorize`) all publish different paths; the discovery document is the one place that names them
(OpenID Connect Discovery 1.0 §4). Settings get *lazy* strings: nothing is fetched when settings are imported
(the migrate hook, the worker and beat never talk to the provider, and a provider that is briefly down does
not stop them), the first use in the web process fetches the document once per process (cached) and checks
that its `issuer` is the configured one (§4.3). An explicit `OIDC_OP_*_ENDPOINT` variable still wins.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from django.utils.functional import lazy

# Setting name -> discovery field.
FIELDS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_LOGOUT_ENDPOINT": "end_session_endpoint",  # optional in the spec: "" when absent
}
REQUIRED = {"authorization_endpoint", "token_endpoint", "jwks_uri"}


@functools.lru_cache(maxsize=8)
def discover(issuer: str) -> dict[str, Any]:
    import requests
    from django.core.exceptions import ImproperlyConfigured

    url = f"{issuer.rstrip('/')}/.well-known/openid-configuration"
    timeout = float(os.environ.get("OIDC_TIMEOUT", "10") or 10)
    try:
        response = requests.get(url, timeout=timeout)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        discover.cache_clear()  # retried at the next use, not cached as a failure
        raise ImproperlyConfigured(f"OIDC discovery failed at {url}: {exc}") from exc
    if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        raise ImproperlyConfigured(
            f"OIDC discovery at {url} names issuer {document.get('issuer')!r}, not {issuer!r} (OIDC_OP_ISSUER)"
        )
    absent = sorted(REQUIRED - document.keys())
    if absent:
        raise ImproperlyConfigured(f"OIDC discovery at {url} lacks {', '.join(absent)}")
    return dict(document)


def _endpoint(issuer: str, field: str) -> str:
    return str(discover(issuer).get(field, ""))


_lazy_endpoint = lazy(_endpoint, str)


def endpoints(issuer: str, env: Any) -> dict[str, Any]:
    """Each OIDC_OP_* endpoint setting: the environment's override, else the discovered value (lazy)."""
    if not issuer:
        return {name: env(name, "") or "" for name in FIELDS}
    return {name: env(name, "") or _lazy_endpoint(issuer, field) for name, field in FIELDS.items()}
