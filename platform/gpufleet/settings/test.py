"""Test profile: starts from base; PostgreSQL and Redis come from the environment (see .ci/run)."""

import os

from .base import *  # noqa: F403
from .base import env

SECRET_KEY = "test-secret-key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests apply tasks explicitly or through a real worker; never implicitly inline.
CELERY_TASK_ALWAYS_EAGER = False
GPUFLEET_PASSWORD_LOGIN = True
# Most tests look at a kubeconfig's shape without an OpenBao; those about the CA turn the refusal back on
# (tests/isolation/test_vcluster_ca.py). The base default (on) is what every other profile gets.
GPUFLEET_KUBECONFIG_REQUIRE_CA = False
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# The test database: GPUFLEET_TEST_DB_NAME when given; on PostgreSQL otherwise one of this run's own
# (`test_<database>_<pid>`), so two runs on one machine never drop each other's database (Django's
# default `test_<database>` is shared and is dropped by whoever starts next). pytest-django drops it at
# the end of the run.
_test_name = env("GPUFLEET_TEST_DB_NAME", None) or f"test_{DATABASES['default']['NAME']}_{os.getpid()}"  # noqa: F405
DATABASES["default"]["TEST"] = {"NAME": _test_name}  # noqa: F405
