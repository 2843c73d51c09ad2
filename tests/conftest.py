"""Fixtures shared by every test package. Package-specific ones live next to their tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.support import factories
from tests.support.services import REFERENCE_DIR, strict


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    """In CI (GPUFLEET_REQUIRE_SERVICES=1) a skipped `service` test is a failure, whatever skipped it:
    CI installs every component, so such a skip means a test silently stopped testing. `missing()`
    already fails there; this catches a plain `pytest.skip` or a skipping fixture too."""
    report = yield
    if report.skipped and strict() and item.get_closest_marker("service") and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"service test skipped in CI (GPUFLEET_REQUIRE_SERVICES=1): {reason}"
    return report


@pytest.fixture(autouse=True)
def _isolated_platform(settings, tmp_path: Path) -> None:
    """Every test gets its own GitOps repository and the shared upstream reference data."""
    settings.GPUFLEET_GITOPS_REPO = str(tmp_path / "gitops")
    settings.GPUFLEET_REFERENCE_DIR = str(REFERENCE_DIR)
    settings.GPUFLEET_BACKEND = "gitops"
    # What one test remembered (a metrics source's probe, a node-health summary) is not the next one's.
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def gitops_repo(settings) -> Path:
    return Path(settings.GPUFLEET_GITOPS_REPO)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def admin_user(db):
    return factories.user("root-admin", roles={"platform-admin"})


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def eager_tasks(settings):
    """Run enqueued tasks inline after commit (the demo's in-process worker)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from gpufleet.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False
