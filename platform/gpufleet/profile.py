"""Which settings profile a long-running entry point (WSGI, ASGI, the Celery worker and beat) runs with.

These entry points never guess: a web or worker process started without DJANGO_SETTINGS_MODULE stops with one
line naming the variable, instead of quietly serving the demo profile (its embedded database, demo users and
local GitOps repository) where production was meant. Only the commands a person types -- `gpufleet` and
`manage.py` -- default to the demo profile, because they are how the demo is run.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

SETTINGS_VARIABLE = "DJANGO_SETTINGS_MODULE"


def require_settings_module(entry_point: str) -> str:
    """The settings module named in the environment; ImproperlyConfigured when none is."""
    module = os.environ.get(SETTINGS_VARIABLE, "").strip()
    if not module:
        raise ImproperlyConfigured(
            f"{entry_point}: {SETTINGS_VARIABLE} is not set; set it to gpufleet.settings.production "
            f"(the chart and the image do), or to gpufleet.settings.demo to serve the demo "
            f"(`gpufleet serve` and `make demo` set it for you)")
    return module
