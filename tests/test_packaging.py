"""Importing gpufleet has no side effects, and the long-running entry points fail closed (issue 29, item 5).

Each check runs in a fresh interpreter without DJANGO_SETTINGS_MODULE, as a process started by hand or by a
misconfigured pod would: what pytest itself has imported or set must not hide the behaviour."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_importing_gpufleet_and_the_terraform_provider_loads_neither_django_nor_celery() -> None:
    run = fresh_python(
        "import os, sys\n"
        "import gpufleet, gpufleet.terraform.provider\n"
        "loaded = sorted(m for m in ('celery', 'django.conf', 'kombu') if m in sys.modules)\n"
        "print(loaded, os.environ.get('DJANGO_SETTINGS_MODULE'))\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[] None"


@pytest.mark.parametrize("module", ["gpufleet.wsgi", "gpufleet.asgi", "gpufleet.celery"])
def test_web_and_worker_entry_points_refuse_to_guess_a_profile(module: str) -> None:
    run = fresh_python(f"import {module}")
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: ")
    assert f"{module}: DJANGO_SETTINGS_MODULE is not set" in last
    assert "gpufleet.settings.production" in last


def test_a_django_process_sends_tasks_through_gpufleets_celery_app() -> None:
    """Without gpufleet/__init__ importing Celery, the app must still be loaded once Django is ready, or
    @shared_task would send through Celery's default app (amqp://localhost)."""
    run = fresh_python(
        "import os, django\n"
        "os.environ['DJANGO_SETTINGS_MODULE'] = 'gpufleet.settings.test'\n"
        "django.setup()\n"
        "from celery import current_app\n"
        "from tenants.tasks import reconcile_tenant\n"
        "print(current_app.main, reconcile_tenant.app.main)\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "gpufleet gpufleet"
