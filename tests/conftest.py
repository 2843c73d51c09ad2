"""Fixtures shared by every test package. Package-specific ones live next to their tests."""

from __future__ import annotations

import json
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


# What the migrations seeded (allocation policies, node-health rules, SLA tiers, the default cluster...), as
# Django serialises it, per database alias; captured once per process right after the test database is made.
SEEDED: dict[str, str] = {}
TRANSACTIONAL_FIXTURES = {"transactional_db", "live_server", "django_db_reset_sequences"}
REMADE_BY_FLUSH = {"contenttypes.contenttype", "auth.permission"}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):  # type: ignore[no-untyped-def]
    from django.db import connections

    with django_db_blocker.unblock():
        for alias in connections:
            rows = json.loads(connections[alias].creation.serialize_db_to_string())
            # Content types and permissions are not seeds: a flush's post_migrate makes them again.
            SEEDED[alias] = json.dumps([row for row in rows if row["model"] not in REMADE_BY_FLUSH])
    yield


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return True
    return bool(TRANSACTIONAL_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """A transactional test ends by flushing the database, and with it what the migrations seeded. pytest-django
    runs such tests after the others, but xdist's work stealing can still hand a worker ordinary tests after
    its transactional ones (the order SLOW_FIRST sets made it happen): they then found no allocation policy, no
    node-health rule. So the seeded rows are loaded again after every transactional test, as Django's
    `serialized_rollback` does before one, and every test starts from the migrated database."""
    result = yield
    if SEEDED and nextitem is not None and _transactional(item):
        from django.db import connections
        from pytest_django.plugin import blocking_manager_key

        with item.config.stash[blocking_manager_key].unblock():
            for alias, data in SEEDED.items():
                connections[alias].creation.deserialize_db_from_string(data)  # ~50 rows: ~0.1 s
    return result


@pytest.fixture(autouse=True)
def _isolated_platform(settings, tmp_path: Path) -> None:
    """Every test gets its own GitOps repository and the shared upstream reference data."""
    settings.GPUFLEET_GITOPS_REPO = str(tmp_path / "gitops")
    settings.GPUFLEET_REFERENCE_DIR = str(REFERENCE_DIR)
    settings.GPUFLEET_BACKEND = "gitops"
    # What one test remembered (a metrics source's probe, a node-health summary) is not the next one's.
    from celery._state import _set_task_join_will_block
    from django.core.cache import cache

    cache.clear()
    # Celery's eager `apply()` sets a process-wide "joining would block" flag and restores the value it saw;
    # two eager tasks overlapping in threads (a live server's requests) can leave it set, and every later
    # `.get()` in this process then raises "Never call result.get() within a task!". No test process is a
    # worker, so it starts cleared.
    _set_task_join_will_block(False)


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
