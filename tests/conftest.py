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


# The modules whose tests take a minute or more each (a browser crawl per role, Terraform apply-to-destroy, the
# README walk-through, the schemathesis contract, a killed worker): collected first, in their own order. xdist's
# `worksteal` hands each worker a contiguous half and lets the idle one steal from the *end* of the other's
# queue, so long tests at the front run while the short ones are shared out, and none is the run's last tail.
# Whole modules move, so a module-scoped fixture is still set up once. Seen in CI: `benchmarks/README.md`.
SLOW_FIRST = (
    "tests/portal/test_crawl.py",
    "tests/terraform/test_provider.py",
    "tests/test_readme_cli.py",
    "tests/terraform/test_clusters.py",
    "tests/api/test_contract.py",
    "tests/faults/test_worker_killed.py",
    "tests/portal/test_browser.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    root = Path(str(config.rootpath))

    def key(item: pytest.Item) -> int:
        return rank.get(Path(str(item.path)).relative_to(root).as_posix(), len(SLOW_FIRST))

    items.sort(key=key)  # stable: every other test keeps its collection order


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
