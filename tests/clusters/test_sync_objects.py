"""The Argo CD ApplicationSets and Flux Kustomizations that sync each host cluster's tree: valid against the
upstream CRDs, pointing at each cluster's folders, credentials only referenced."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command

from infra.schemas import SchemaRegistry
from scheduling.clusters import sync_objects
from tests.support.services import REFERENCE_DIR, need_reference

TARGETS = [
    sync_objects.SyncTarget("default", "clusters/default"),
    sync_objects.SyncTarget("training", "clusters/training", "https://training.example:6443", "training-kubeconfig"),
    sync_objects.SyncTarget("dev", "clusters/dev", "https://dev.example:6443", "dev-kubeconfig"),
]
REPO_URL = "ssh://git@git.example.com/platform/gpufleet-desired-state.git"


def registry() -> SchemaRegistry:
    need_reference()
    return SchemaRegistry(str(REFERENCE_DIR), kubernetes_version="1.33")


@pytest.mark.parametrize("tool", ["argocd", "flux"])
def test_valid_against_the_upstream_crds(tool: str) -> None:
    docs = getattr(sync_objects, tool)(TARGETS, REPO_URL)
    schemas = registry()
    assert all(schemas.knows(d["apiVersion"].rpartition("/")[0], d["kind"]) for d in docs)
    assert schemas.validate(docs) == []


def elements(app_set: dict) -> list[dict]:
    return app_set["spec"]["generators"][0]["list"]["elements"]


def test_argocd_one_application_set_per_cluster_with_its_destination() -> None:
    sets = {d["metadata"]["name"]: d for d in sync_objects.argocd(TARGETS, REPO_URL)}
    assert sorted(sets) == ["gpufleet-default", "gpufleet-dev", "gpufleet-training"]
    training = sets["gpufleet-training"]["spec"]
    assert training["template"]["spec"]["source"]["path"] == "{{.path}}"
    assert [(e["stage"], e["path"]) for e in elements(sets["gpufleet-training"])] == [
        ("controllers", "clusters/training/platform"), ("configs", "clusters/training/platform"),
        ("tenants", "clusters/training/tenants")]
    assert training["template"]["spec"]["destination"] == {"server": "https://training.example:6443"}
    assert sets["gpufleet-default"]["spec"]["template"]["spec"]["destination"]["server"] == sync_objects.IN_CLUSTER


def test_argocd_applications_skip_the_dry_run_of_missing_kinds_and_retry() -> None:
    """B2: the configs/tenants Applications meet kinds whose CRDs the controllers install (gitops-engine
    sync_context.go:881-902 skips their dry-run only with this option) and must retry until they exist."""
    for app_set in sync_objects.argocd(TARGETS, REPO_URL):
        policy = app_set["spec"]["template"]["spec"]["syncPolicy"]
        assert "SkipDryRunOnMissingResource=true" in policy["syncOptions"]
        assert policy["retry"]["limit"] < 0 and policy["retry"]["backoff"]["maxDuration"]
        controllers, configs, tenants = elements(app_set)
        assert controllers["include"] == configs["exclude"] != ""
        assert "helmrelease.helm.toolkit.fluxcd.io_*.yaml" in controllers["include"]
        assert controllers["exclude"] == configs["include"] == tenants["include"] == tenants["exclude"] == ""



def test_argocd_rolling_sync_selects_every_application_in_stage_order() -> None:
    """F8: sync waves do not order an ApplicationSet's Applications; RollingSync steps do, and an Application
    no step selects would never be synced (argo-cd v3.5.1 Progressive-Syncs.md)."""
    from .bootstrap_model import generated_apps, rolling_steps

    for app_set in sync_objects.argocd(TARGETS, REPO_URL):
        cluster = app_set["metadata"]["labels"]["gpufleet.io/cluster"]
        apps = generated_apps(app_set)
        assert rolling_steps(app_set, [(a.name, a.labels) for a in apps]) == [
            [f"gpufleet-{cluster}-{stage}"] for stage in sync_objects.STAGES]
        assert all(a.labels[sync_objects.STAGE_LABEL] == stage_of for a, stage_of in zip(apps, sync_objects.STAGES,
                                                                                            strict=True))
        assert "annotations" not in app_set["spec"]["template"]["metadata"]  # no sync-wave that orders nothing
        # Used only when progressive syncs are off (the controller then ignores the strategy); RollingSync
        # turns it off itself and keeps the retry (bootstrap_model.sync_operation).
        assert app_set["spec"]["template"]["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}


def test_flux_kustomizations_per_cluster_reference_the_kubeconfig_secret() -> None:
    docs = sync_objects.flux(TARGETS, REPO_URL)
    kustomizations = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Kustomization"}
    assert kustomizations["gpufleet-dev-tenants"]["path"] == "./clusters/dev/tenants"
    assert kustomizations["gpufleet-dev-tenants"]["dependsOn"] == [{"name": "gpufleet-dev-configs"}]
    assert kustomizations["gpufleet-dev-configs"]["dependsOn"] == [{"name": "gpufleet-dev-controllers"}]
    assert "dependsOn" not in kustomizations["gpufleet-dev-controllers"]
    assert kustomizations["gpufleet-dev-controllers"]["wait"] and kustomizations["gpufleet-dev-configs"]["wait"]
    for stage in sync_objects.STAGES:
        assert kustomizations[f"gpufleet-dev-{stage}"]["kubeConfig"] == {
            "secretRef": {"name": "dev-kubeconfig", "key": "kubeconfig"}}
        assert "kubeConfig" not in kustomizations[f"gpufleet-default-{stage}"]
    assert "apiVersion: v1\nkind: Config" not in yaml.safe_dump_all(docs)


# --- B7: every cluster's tree goes to that cluster, or the render refuses -------------------------------------


def test_argocd_addresses_a_cluster_registered_only_by_its_secret_by_name() -> None:
    """Before: `kube_api or IN_CLUSTER` sent such a cluster's tree to the cluster Argo CD runs in."""
    only_secret = sync_objects.SyncTarget("edge", "clusters/edge", "", "edge-kubeconfig")
    (app_set,) = sync_objects.argocd([only_secret], REPO_URL)
    assert app_set["spec"]["template"]["spec"]["destination"] == {"name": "edge"}


@pytest.mark.parametrize("tool", ["argocd", "flux"])
def test_two_clusters_without_credentials_are_refused(tool: str) -> None:
    two_local = [sync_objects.SyncTarget("default", "clusters/default"), sync_objects.SyncTarget("b", "clusters/b")]
    with pytest.raises(sync_objects.SyncTargetError, match="default, b name neither"):
        getattr(sync_objects, tool)(two_local, REPO_URL)


@pytest.mark.parametrize("target, why", [
    (sync_objects.SyncTarget("edge", "clusters/edge", "https://edge:6443", ""), "no kubeconfig_secret"),
    (sync_objects.SyncTarget("edge", "clusters/edge", "https://edge:6443", "/etc/kube/edge"), "is a file path"),
])
def test_flux_refuses_a_remote_cluster_without_a_secret(target, why: str) -> None:
    """Before: the Kustomizations were rendered without kubeConfig, i.e. applied to Flux's own cluster."""
    with pytest.raises(sync_objects.SyncTargetError, match=why):
        sync_objects.flux([sync_objects.SyncTarget("default", "clusters/default"), target], REPO_URL)
    assert sync_objects.argocd([target], REPO_URL)  # Argo CD addresses it by its kube_api


@pytest.mark.django_db
def test_render_sync_refuses_loudly(capsys) -> None:
    from django.core.management.base import CommandError

    from scheduling.models import Cluster

    Cluster.objects.create(name="edge", kube_api="https://edge:6443")
    with pytest.raises(CommandError, match="cluster edge: it has an API URL but no kubeconfig_secret"):
        call_command("render", "--sync", "flux", "--repo-url", REPO_URL)


@pytest.mark.django_db
def test_render_sync_prints_them_for_the_operator(capsys) -> None:
    need_reference()
    call_command("render", "--sync", "flux", "--repo-url", REPO_URL, "--validate")
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert {d["spec"]["path"] for d in docs if d["kind"] == "Kustomization"} == {
        "./clusters/default/platform", "./clusters/default/tenants"}
    assert len([d for d in docs if d["kind"] == "Kustomization"]) == 3
