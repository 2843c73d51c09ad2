"""Reconcile into a real git repository: ready, idempotent, one commit per change, pruned on delete."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.gitops.git import Git
from tenants import actions, reconcile
from tenants.models import Phase, Tenant
from tests.gitops.helpers import git
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)


def commits(repo: Path) -> int:
    out = Git(repo).run("rev-list", "--count", "HEAD")
    return int(out.strip())


def tenant_files(repo: Path, slug: str) -> list[str]:
    folder = repo / "clusters/default/tenants" / slug
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_approve_reconcile_ready_then_noop_then_update_then_delete(gitops_repo: Path) -> None:
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    outcome = reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY, outcome.summary
    assert tenant.observed_generation == tenant.generation == 1
    files = tenant_files(gitops_repo, "acme")
    assert "namespace.core_tenant-acme.yaml" in files
    assert "helmrelease.helm.toolkit.fluxcd.io_tenant-acme_vcluster.yaml" in files
    first = commits(gitops_repo)

    reconcile.reconcile_tenant(tenant.pk)
    assert commits(gitops_repo) == first, "a no-op reconcile must not commit"

    actions.update(tenant, display_name="Acme GPUs")
    reconcile.reconcile_tenant(tenant.pk)
    assert commits(gitops_repo) == first + 1
    log = Git(gitops_repo).run("log", "-1", "--format=%s")
    assert log.strip() == "tenant acme: reconcile generation 2"
    tenant.refresh_from_db()
    assert tenant.observed_generation == 2

    actions.delete(Tenant.objects.get(pk=tenant.pk))
    reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DELETED
    assert tenant_files(gitops_repo, "acme") == []
    assert commits(gitops_repo) == first + 2


def test_an_approve_applies_the_platform_only_where_it_is_missing(gitops_repo: Path, monkeypatch) -> None:
    platforms: list[int] = []
    original = reconcile.reconcile_platform
    monkeypatch.setattr(reconcile, "reconcile_platform", lambda *a, **k: platforms.append(1) or original(*a, **k))
    first = factories.tenant("first", "standard")
    actions.approve(first)
    reconcile.reconcile_tenant(first.pk)
    assert platforms == [1]  # an empty repository: the first tenant brings the platform's objects
    assert any((gitops_repo / "clusters/default/platform").iterdir())

    second = factories.tenant("second", "standard")
    actions.approve(second)
    reconcile.reconcile_tenant(second.pk)
    assert platforms == [1]  # committed already: not rendered (every tenant's queue) for each approve
    assert Tenant.objects.get(pk=second.pk).phase == Phase.READY

    # The platform's folder gone from HEAD (removed by hand and committed): the next approve brings it back.
    # (as a person a moment later: once the last commit's background index update is done)
    git(gitops_repo, "rm", "-rq", "clusters/default/platform")
    git(gitops_repo, "commit", "-qm", "remove the platform")
    third = factories.tenant("third", "standard")
    actions.approve(third)
    reconcile.reconcile_tenant(third.pk)
    assert platforms == [1, 1]
    assert any((gitops_repo / "clusters/default/platform").iterdir())
