"""The approvals page (where platform admins look) shows the fleet's sync status: last sync time, drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from infra.gitops.git import Git
from scheduling.clusters.sync import sync_fleet
from tenants import actions, reconcile
from tests.support import factories
from tests.support.services import need_binary, need_reference

pytestmark = pytest.mark.django_db(transaction=True)


def test_approvals_page_shows_last_sync_time_and_drift_count(admin_client_, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    url = reverse("portal:approvals")
    assert "No fleet sync has run yet" in admin_client_.get(url).content.decode()

    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk).result is not None
    # drift behind our back
    (gitops_repo / "clusters/default/tenants" / "acme" / "namespace.core_tenant-acme.yaml").unlink()
    run = sync_fleet()

    page = admin_client_.get(url).content.decode()
    assert f'<time datetime="{run.started.isoformat()}">{run.started:%Y-%m-%d %H:%M:%S} UTC</time>' in page
    assert '<dd class="drift-count">1</dd>' in page
    assert "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml" in page
    assert "No fleet sync has run yet" not in page


def test_approvals_page_shows_the_repository_condition_and_the_last_push(admin_client_, settings, tmp_path) -> None:
    """Issue 16 §1: a publish that stopped is visible where admins look, with the time of the last push."""
    need_binary("git")
    need_reference()
    remote = tmp_path / "remote.git"
    Git(tmp_path).run("init", "-q", "--bare", "-b", "main", str(remote))
    settings.GPUFLEET_GITOPS_REMOTE = str(remote)
    settings.GPUFLEET_GITOPS_PUSH = True
    settings.GPUFLEET_GITOPS_PUSH_STATUS_DIR = str(tmp_path / "push")
    (tmp_path / "push").mkdir()
    (tmp_path / "push" / "last-push").write_text(f"1795000000 {'a' * 40}\n")
    (tmp_path / "push" / "push-status").write_text("state=rejected\nat=1795000100\nmessage=protected branch\n")

    run = sync_fleet()

    assert run.state == "partial" and "push: rejected: protected branch" in run.errors
    page = admin_client_.get(reverse("portal:approvals")).content.decode()
    assert '<dd class="repository" data-status="True">Committed:' in page
    assert '<time datetime="2026-11-18T11:06:40' in page and "<code>aaaaaaaaaaaa</code>" in page
    assert "last round: rejected: protected branch" in page
    status = run.as_status()
    assert status["last_push_at"].startswith("2026-11-18T11:06:40") and status["last_push_age_seconds"] > 0
