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
