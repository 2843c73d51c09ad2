"""The approvals page (where platform admins look) shows the fleet's sync status: last sync time, drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from scheduling.sync import sync_fleet
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
    (gitops_repo / "tenants" / "acme" / "namespace.core_tenant-acme.yaml").unlink()  # drift behind our back
    run = sync_fleet()

    page = admin_client_.get(url).content.decode()
    assert f'<time datetime="{run.started.isoformat()}">{run.started:%Y-%m-%d %H:%M:%S} UTC</time>' in page
    assert '<dd class="drift-count">1</dd>' in page
    assert "tenants/acme/namespace.core_tenant-acme.yaml" in page
    assert "No fleet sync has run yet" not in page
