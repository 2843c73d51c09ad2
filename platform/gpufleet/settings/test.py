"""Test profile: starts from base; PostgreSQL and Redis come from the environment (see .ci/run)."""

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = "test-secret-key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests apply tasks explicitly or through a real worker; never implicitly inline.
CELERY_TASK_ALWAYS_EAGER = False
GPUFLEET_PASSWORD_LOGIN = True
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
DATABASES["default"]["TEST"] = {"NAME": env("GPUFLEET_TEST_DB_NAME", None)}  # noqa: F405
# Nothing runs collectstatic (WhiteNoise serves the apps' files), so var/static does not exist in a fresh
# checkout, and WhiteNoise's "No directory at …/static/" warning is an error under pytest.
STATIC_ROOT = None
