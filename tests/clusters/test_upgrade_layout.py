"""Upgrade path (issue 9): a single-cluster installation's GitOps repository, in the root layout (`platform/`,
`tenants/<slug>/`), becomes cluster `default`'s tree in ONE commit of pure renames made by the first fleet
reconcile after the migration; nothing is re-rendered, and the reconcile that follows commits nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from scheduling import actions as sched
from scheduling.clusters import delivery
from tenants import actions as tenant_actions
from tenants import fleet
from tenants.fleet import reconcile_fleet
from tenants.models import Phase, Tenant
from tests.gitops.helpers import commits, git, status
from tests.support import factories
from tests.support.services import need_binary, need_reference

pytestmark = pytest.mark.django_db(transaction=True)


def test_root_layout_moves_to_clusters_default_in_one_commit_of_renames(
    gitops_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_binary("git")
    need_reference()
    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    sched.create_node_pool("h100-pool", flavor="h100", gpu_limit=8)
    for slug, trust in (("acme", "standard"), ("beta", "untrusted"), ("gamma", "trusted")):
        tenant = factories.tenant(slug, trust)
        sched.set_quota(tenant, flavor="h100", nominal=2)
        tenant_actions.approve(Tenant.objects.get(pk=tenant.pk))

    # The installation before host clusters: the same objects, delivered to the repository's root.
    real = delivery.clusters_of
    with monkeypatch.context() as before_clusters:
        before_clusters.setattr(delivery, "clusters_of",
                                lambda ctx: {name: replace(c, tree="") for name, c in real(ctx).items()})
        reconcile_fleet()
        assert reconcile_fleet().outcomes == []
    # The code that rendered into the root is gone after an upgrade, and with it the process's memo of what each
    # set of render inputs rendered (tenants.fleet): the render is patched in place here, so forget it too.
    fleet.forget_renders()
    assert (gitops_repo / "tenants/acme").is_dir() and (gitops_repo / "platform").is_dir()
    old_trees = {root: git(gitops_repo, "rev-parse", f"HEAD:{root}").strip() for root in ("platform", "tenants")}
    count = commits(gitops_repo)
    digests = dict(Tenant.objects.values_list("slug", "applied_digest"))

    moved = reconcile_fleet()

    assert commits(gitops_repo) == count + 1, "exactly one commit"
    assert moved.errors == [] and moved.outcomes == [], "no tenant was re-rendered"
    assert sorted(moved.clean) == ["acme", "beta", "gamma"]
    changes = git(gitops_repo, "show", "--format=", "--name-status", "-M", "HEAD").splitlines()
    assert changes and all(line.startswith("R100\t") for line in changes), changes
    assert all(line.split("\t")[2] == "clusters/default/" + line.split("\t")[1] for line in changes)
    for root, tree in old_trees.items():  # content unchanged: the very same git tree objects
        assert git(gitops_repo, "rev-parse", f"HEAD:clusters/default/{root}").strip() == tree
    assert not (gitops_repo / "tenants").exists() and not (gitops_repo / "platform").exists()
    assert status(gitops_repo) == ""
    assert dict(Tenant.objects.values_list("slug", "applied_digest")) == digests
    assert set(Tenant.objects.values_list("phase", flat=True)) == {Phase.READY}

    # The no-op reconcile after it commits nothing -- and finds no drift (the drift records moved too).
    head = git(gitops_repo, "rev-parse", "HEAD")
    again = reconcile_fleet()
    assert again.outcomes == [] and again.errors == [] and git(gitops_repo, "rev-parse", "HEAD") == head
    (gitops_repo / "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml").write_text("edited: 1\n")
    repaired = reconcile_fleet()
    assert [o.tenant for o in repaired.outcomes] == ["acme"]
    assert repaired.outcomes[0].result.drifted == [
        "clusters/default/tenants/acme/namespace.core_tenant-acme.yaml"]


def test_one_cluster_renders_exactly_what_the_single_cluster_code_rendered() -> None:
    """What the code before clusters called -- render_tenant / render_platform with the whole catalog and every
    quota -- is byte for byte what cluster `default` now gets, endpoints and node pools included."""
    from infra.manifests import to_yaml_stream
    from tenants.reconcile import tenant_view
    from tenants.render import RenderContext, platform_targets, render_placed, render_platform, render_tenant

    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    sched.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=14)
    sched.create_node_pool("h100-pool", flavor="h100", gpu_limit=8)
    tenant = factories.tenant("acme", "trusted")
    sched.set_quota(tenant, flavor="h100", nominal=2)
    sched.set_quota(tenant, flavor="h100-3g", nominal=4, borrowing_limit=2)
    sched.create_endpoint(tenant, "chat", model="llama", tier="standard")
    tenant_actions.approve(Tenant.objects.get(pk=tenant.pk))
    ctx = RenderContext.from_settings()
    view = tenant_view(Tenant.objects.get(pk=tenant.pk))
    [(placed, objects)] = render_placed(view, ctx)
    assert (placed.cluster, placed.tree, placed.home) == ("default", "clusters/default", True)
    assert to_yaml_stream(objects) == to_yaml_stream(render_tenant(view, ctx))
    assert any(o["kind"] == "ScaledObject" for o in objects) and any(o["kind"] == "HelmRelease" for o in objects)
    [target] = platform_targets(ctx)
    assert to_yaml_stream(render_platform(target.ctx)) == to_yaml_stream(render_platform(ctx))
