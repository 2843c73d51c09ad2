"""The Argo CD ApplicationSets and Flux Kustomizations that sync each host cluster's tree: valid against the
upstream CRDs, pointing at each cluster's folders, credentials only referenced."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import call_command

from infra.schemas import SchemaRegistry
from scheduling import sync_objects
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


def test_argocd_one_application_set_per_cluster_with_its_destination() -> None:
    sets = {d["metadata"]["name"]: d for d in sync_objects.argocd(TARGETS, REPO_URL)}
    assert sorted(sets) == ["gpufleet-default", "gpufleet-dev", "gpufleet-training"]
    training = sets["gpufleet-training"]["spec"]
    assert training["template"]["spec"]["source"]["path"] == "clusters/training/{{.folder}}"
    assert training["template"]["spec"]["destination"] == {"server": "https://training.example:6443"}
    assert [e["folder"] for e in training["generators"][0]["list"]["elements"]] == ["platform", "tenants"]
    assert sets["gpufleet-default"]["spec"]["template"]["spec"]["destination"]["server"] == sync_objects.IN_CLUSTER


def test_flux_kustomizations_per_cluster_reference_the_kubeconfig_secret() -> None:
    docs = sync_objects.flux(TARGETS, REPO_URL)
    kustomizations = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Kustomization"}
    assert kustomizations["gpufleet-dev-tenants"]["path"] == "./clusters/dev/tenants"
    assert kustomizations["gpufleet-dev-tenants"]["dependsOn"] == [{"name": "gpufleet-dev-platform"}]
    assert kustomizations["gpufleet-dev-platform"]["kubeConfig"] == {
        "secretRef": {"name": "dev-kubeconfig", "key": "kubeconfig"}}
    assert "kubeConfig" not in kustomizations["gpufleet-default-platform"]
    assert "apiVersion: v1\nkind: Config" not in yaml.safe_dump_all(docs)


@pytest.mark.django_db
def test_render_sync_prints_them_for_the_operator(capsys) -> None:
    need_reference()
    call_command("render", "--sync", "flux", "--repo-url", REPO_URL, "--validate")
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert {d["spec"]["path"] for d in docs if d["kind"] == "Kustomization"} == {
        "./clusters/default/platform", "./clusters/default/tenants"}
