"""Fleet sync (Celery beat `scheduling.sync_fleet`): repairs and counts drift, records a SyncRun, shows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.template import Context, Template
from rest_framework.test import APIClient

from scheduling.clusters.sync import sync_fleet, sync_fleet_task
from scheduling.models import SyncRun
from tenants import actions, reconcile
from tests.support import factories
from tests.support.services import need_binary, need_reference

from .helpers import commits, git, status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet(gitops_repo: Path) -> list:
    need_binary("git")
    need_reference()
    tenants = []
    for slug in ("acme", "beta"):
        tenant = factories.tenant(slug, "standard")
        actions.approve(tenant)
        outcome = reconcile.reconcile_tenant(tenant.pk)
        assert outcome.result is not None, outcome.summary
        tenants.append(tenant)
    return tenants


def namespace_file(repo: Path, slug: str) -> Path:
    return repo / "clusters/default/tenants" / slug / f"namespace.core_tenant-{slug}.yaml"


def test_sync_restores_a_committed_hand_edit_and_counts_one_drift(fleet: list, gitops_repo: Path) -> None:
    target = namespace_file(gitops_repo, "acme")
    original = target.read_bytes()
    target.write_text(target.read_text().replace("enforce: baseline", "enforce: privileged"))
    git(gitops_repo, "commit", "-q", "-am", "loosen pod security by hand")
    before = commits(gitops_repo)

    run = sync_fleet()

    assert run.state == SyncRun.State.OK, run.errors
    assert run.drift_count == 1
    assert run.drifted == [f"clusters/default/tenants/acme/{target.name}"]
    assert run.objects_changed == 1
    assert run.owners == 3  # platform + two tenants
    assert run.objects_checked >= 2 * 4
    assert run.finished is not None and run.finished >= run.started
    assert target.read_bytes() == original
    assert commits(gitops_repo) == before + 1
    assert "repair drift" in git(gitops_repo, "log", "-1", "--format=%s")

    again = sync_fleet()
    assert again.drift_count == 0 and again.objects_changed == 0
    assert commits(gitops_repo) == before + 1


def test_sync_restores_a_deleted_file(fleet: list, gitops_repo: Path) -> None:
    target = namespace_file(gitops_repo, "beta")
    target.unlink()
    run = sync_fleet()
    assert run.drift_count == 1 and run.drifted == [f"clusters/default/tenants/beta/{target.name}"]
    assert target.exists() and status(gitops_repo) == ""


def test_beat_task_records_the_status_and_is_scheduled(fleet: list, gitops_repo: Path, eager_tasks) -> None:
    namespace_file(gitops_repo, "acme").write_text("kind: Namespace\n")
    namespace_file(gitops_repo, "beta").unlink()

    # An eagerly run task's result, read outside any task: Celery's "never call get() within a task" guard is a
    # process-wide flag that an earlier test's in-process task execution may have left set.
    status_payload = sync_fleet_task.delay().get(disable_sync_subtasks=False)

    run = SyncRun.objects.get()
    assert status_payload["drift_count"] == run.drift_count == 2
    assert status_payload["state"] == "ok"
    from gpufleet.celery import app

    app.finalize()
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {"scheduling.sync_fleet", "tenants.reconcile_all"} <= scheduled
    assert "scheduling.sync_fleet" in app.tasks


def test_an_invalid_tenant_is_an_error_on_the_run_not_a_crash(fleet: list, gitops_repo: Path, settings) -> None:
    from tenants.models import Tenant

    Tenant.objects.filter(slug="beta").update(trust_level="no-such-level")
    run = sync_fleet()
    assert run.state == SyncRun.State.PARTIAL
    assert run.errors and "tenant" in run.errors[0]
    assert run.owners == 2  # platform and acme were still applied


def test_api_shows_latest_status_to_platform_admins_only(fleet: list, gitops_repo: Path, admin_api) -> None:
    assert admin_api.get("/api/v1/sync/").json()["latest"] is None
    namespace_file(gitops_repo, "acme").unlink()
    sync_fleet()
    sync_fleet()

    body = admin_api.get("/api/v1/sync/").json()
    assert body["latest"]["drift_count"] == 0
    assert [r["drift_count"] for r in body["history"]] == [0, 1]
    assert body["last_success"] == body["latest"]["finished"]

    member = factories.user("acme-admin")
    actions.add_member(fleet[0], member, "admin")
    client = APIClient()
    client.force_authenticate(member)
    assert client.get("/api/v1/sync/").status_code == 403
    assert APIClient().get("/api/v1/sync/").status_code in (401, 403)


def test_portal_snippet_shows_last_sync_time_and_drift(fleet: list, gitops_repo: Path) -> None:
    template = Template("{% load sync_status %}{% sync_status %}")
    assert "No fleet sync has run yet" in template.render(Context())
    namespace_file(gitops_repo, "acme").unlink()
    run = sync_fleet()
    html = template.render(Context())
    assert f'datetime="{run.started.isoformat()}"' in html or run.started.strftime("%Y-%m-%d %H:%M") in html
    assert '<dd class="drift-count">1</dd>' in html
    assert "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml" in html
