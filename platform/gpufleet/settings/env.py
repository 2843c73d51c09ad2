"""Small helpers for reading settings from the environment."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    value = os.environ.get(name)
    if value in (None, ""):
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def require(name: str) -> str:
    """Read a variable production cannot run without; fail fast naming it."""
    value = os.environ.get(name)
    if value in (None, ""):
        raise ImproperlyConfigured(
            f"{name} must be set in the environment for the production profile "
            f"(DJANGO_SETTINGS_MODULE=gpufleet.settings.production)."
        )
    return value


# Known development/test keys: a production process must never sign sessions with one of these.
KNOWN_KEYS = {"insecure-development-key-not-for-production", "test-secret-key", "changeme", "secret"}
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE = 5


def require_secret_key(name: str = "SECRET_KEY") -> str:
    """The signing key, or refuse to start: set, not a known default, long and varied (Django's rule)."""
    value = require(name)
    problem = None
    if value in KNOWN_KEYS or value.startswith("django-insecure"):
        problem = "is a known development default"
    elif len(value) < SECRET_KEY_MIN_LENGTH:
        problem = f"is {len(value)} characters; it needs at least {SECRET_KEY_MIN_LENGTH}"
    elif len(set(value)) < SECRET_KEY_MIN_UNIQUE:
        problem = f"has fewer than {SECRET_KEY_MIN_UNIQUE} different characters"
    if problem:
        raise ImproperlyConfigured(
            f"{name} {problem}. Generate one with: python -c 'import secrets; print(secrets.token_urlsafe(64))'"
        )
    return value
