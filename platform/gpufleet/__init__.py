"""gpufleet: the platform layer (settings, accounts, API, portal, audit)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
