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
