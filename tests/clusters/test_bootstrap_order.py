"""Issue 26 B2: a fresh cluster converges through each delivery path -- Flux, Argo CD (here, against the model of
tests/clusters/bootstrap_model.py) and the kube backend (tests/kube/test_bootstrap_crds.py) -- and the shape
before the fix deadlocks in the same model, so the model can tell the two apart."""

from __future__ import annotations

import pytest

from scheduling import actions
from scheduling.clusters import sync_objects
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, render_platform
from tests.support import factories
from tests.support.services import need_reference

from .bootstrap_model import (
    PREINSTALLED_GROUPS,
    Cluster,
    RollingState,
    argo_rolling_tick,
    argo_tick,
    flux_tick,
    gitignored,
    repository,
)

pytestmark = pytest.mark.django_db
URL = "ssh://git@git.example.com/platform/gpufleet-desired-state.git"
TARGET = sync_objects.SyncTarget("default", "clusters/default")
TICKS = 6


@pytest.fixture
def trees() -> dict[str, list[dict]]:
    need_reference()
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    actions.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=14)
    tenant = factories.tenant("acme", "standard", phase=Phase.READY)
    actions.set_quota(tenant, flavor="h100", nominal=4)
    return {"clusters/default/platform": render_platform(RenderContext.from_settings()),
            "clusters/default/tenants/acme": desired_manifests(tenant)}


def everything(trees: dict[str, list[dict]]) -> list[dict]:
    return [m for manifests in trees.values() for m in manifests]


def test_the_platform_tree_mixes_releases_with_the_custom_resources_of_their_crds(trees) -> None:
    """The premise: without an order, nothing can apply this tree on a fresh cluster in one batch."""
    cluster = Cluster()
    platform = trees["clusters/default/platform"]
    assert any(m["kind"] == "HelmRelease" for m in platform)
    assert any(cluster.refusal(m) for m in platform)


def test_flux_converges_controllers_then_configs_then_tenants(trees) -> None:
    cluster, ready = Cluster(), set()
    sync = sync_objects.flux([TARGET], URL)
    repo = repository(trees)
    for _ in range(TICKS):
        flux_tick(cluster, sync, repo, ready)
        cluster.helm_controller()
    assert cluster.has_all(everything(trees)), cluster.log
    assert ready == {f"gpufleet-default-{stage}" for stage in sync_objects.STAGES}


def test_flux_before_the_fix_deadlocks(trees) -> None:
    """Two Kustomizations (platform, then tenants): the platform's dry-run fails on its first ResourceFlavor
    every time, so the HelmReleases that would install Kueue are never applied."""
    cluster, ready = Cluster(), set()
    old = [{"kind": "GitRepository", "metadata": {"name": "repo"}, "spec": {}}] + [
        {"kind": "Kustomization", "metadata": {"name": f"gpufleet-default-{folder}"},
         "spec": {"sourceRef": {"name": "repo"}, "path": f"./clusters/default/{folder}", "wait": folder == "platform",
                  **({"dependsOn": [{"name": "gpufleet-default-platform"}]} if folder == "tenants" else {})}}
        for folder in ("platform", "tenants")]
    repo = repository(trees)
    for _ in range(TICKS):
        flux_tick(cluster, old, repo, ready)
        cluster.helm_controller()
    assert not cluster.installed_releases and ready == set()
    assert "dry-run failed: no matches for kind" in cluster.log[0]


def test_argo_converges_with_skip_dry_run_and_retry(trees) -> None:
    """Progressive syncs off on the ApplicationSet controller (its default): the RollingSync strategy is ignored
    (AllAtOnce), the Applications keep their automated sync, and retry carries configs and tenants through."""
    cluster, failed = Cluster(), set()
    sync = sync_objects.argocd([TARGET], URL)
    repo = repository(trees)
    for _ in range(TICKS):
        argo_tick(cluster, sync, repo, failed)
        cluster.helm_controller()
    assert failed == set()
    assert cluster.has_all(everything(trees)), cluster.log


def stage_of(name: str) -> str:
    return name.rsplit("-", 1)[-1]


def test_argo_rolling_sync_syncs_each_stage_after_the_previous_one_is_healthy(trees) -> None:
    """F8: with progressive syncs on, configs is synced only once the controllers' HelmReleases are installed
    (Healthy), tenants only once configs is Healthy -- so neither meets a kind without its CRD."""
    cluster, state = Cluster(), RollingState()
    sync = sync_objects.argocd([TARGET], URL)
    repo = repository(trees)
    for _ in range(TICKS + 2):
        argo_rolling_tick(cluster, sync, repo, state)
        cluster.helm_controller()
    assert cluster.has_all(everything(trees)), cluster.log
    assert [(stage_of(app), sorted(map(stage_of, healthy))) for app, healthy in state.triggered] == [
        ("controllers", []), ("configs", ["controllers"]), ("tenants", ["configs", "controllers"])]
    assert not [line for line in cluster.log if "failed" in line], cluster.log
    assert set(state.statuses.values()) == {"Healthy"}


def late_prerequisite(trees) -> str:
    """A prerequisite API group (not installed by the platform) that the configs stage uses."""
    platform = trees["clusters/default/platform"]
    groups = {m["apiVersion"].rpartition("/")[0] for m in platform if m["kind"] not in (
        "HelmRelease", "HelmRepository", "OCIRepository")}
    return sorted(groups & PREINSTALLED_GROUPS)[0]


@pytest.mark.parametrize("retry, converges", [("unlimited", True), ("none", False)])
def test_argo_rolling_sync_relies_on_the_applications_retry(trees, retry: str, converges: bool) -> None:
    """RollingSync starts one sync per step and never another (argo-cd@v3.5.1:applicationset/progressivesync/
    progressive_sync.go:481); the Application controller retries it within the operation's limit, which is the
    Application's retry, or 5. A prerequisite installed late (here after 8 failed attempts): the rendered
    unlimited retry converges; without it configs stays failed and tenants is never synced."""
    cluster, state = Cluster(absent={late_prerequisite(trees)}), RollingState()
    sync = sync_objects.argocd([TARGET], URL)
    if retry == "none":
        del sync[0]["spec"]["template"]["spec"]["syncPolicy"]["retry"]
    repo = repository(trees)
    for tick in range(TICKS + 10):
        if tick == 10:
            cluster.absent.clear()  # the operator installs it
        argo_rolling_tick(cluster, sync, repo, state)
        cluster.helm_controller()
    assert cluster.has_all(everything(trees)) is converges, cluster.log
    tenants_synced = any(stage_of(app) == "tenants" for app, _ in state.triggered)
    assert tenants_synced is converges
    if not converges:
        assert "argo: gpufleet-default-configs sync failed after 5 retries" in cluster.log


def test_argo_before_the_fix_stops_at_the_first_failed_sync(trees) -> None:
    """No SkipDryRunOnMissingResource, no retry: the platform Application's dry-run fails once and the same
    revision is not synced again."""
    cluster, failed = Cluster(), set()
    app_set = sync_objects.argocd([TARGET], URL)[0]
    spec = app_set["spec"]["template"]["spec"]
    spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}, "syncOptions": ["ServerSideApply=true"]}
    spec["source"]["directory"] = {"recurse": True}
    app_set["spec"]["template"]["metadata"]["name"] = "gpufleet-default-{{.folder}}"
    spec["source"]["path"] = "clusters/default/{{.folder}}"
    app_set["spec"]["generators"][0]["list"]["elements"] = [{"folder": "platform"}, {"folder": "tenants"}]
    repo = repository(trees)
    for _ in range(TICKS):
        argo_tick(cluster, [app_set], repo, failed)
        cluster.helm_controller()
    assert failed == {"gpufleet-default-platform", "gpufleet-default-tenants"}
    assert not cluster.has_all(everything(trees))


def test_the_stage_sources_split_the_platform_folder_exactly(trees) -> None:
    ignores = sync_objects.flux_ignores()
    for m in trees["clusters/default/platform"]:
        path = next(p for p, o in repository(trees).items() if o is m)
        installer = m["kind"] in ("HelmRelease", "HelmRepository", "OCIRepository")
        assert gitignored(path, ignores["controllers"]) is not installer
        assert gitignored(path, ignores["configs"]) is installer
    # the tenants' own HelmRelease (vCluster) stays in what the tenants Kustomization reads
    assert not any(gitignored(p, "") for p in repository(trees))
