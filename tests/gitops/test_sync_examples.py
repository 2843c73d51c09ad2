"""Issue 16 §5: the Flux and Argo CD objects that sync the GitOps repository are valid against their CRDs
and point at the folders gpufleet writes."""

from __future__ import annotations

import pytest
import yaml

from infra.schemas import SchemaRegistry
from tests.support.services import REFERENCE_DIR, REPO, need_reference

EXAMPLES = REPO / "examples" / "gitops-sync"


def objects(name: str) -> list[dict]:
    return [o for o in yaml.safe_load_all((EXAMPLES / name).read_text()) if o]


@pytest.mark.parametrize("name", ["flux.yaml", "argocd.yaml"])
def test_sync_objects_are_valid_against_the_upstream_crds(name: str) -> None:
    need_reference()
    registry = SchemaRegistry(str(REFERENCE_DIR), kubernetes_version="1.33")
    docs = objects(name)
    assert docs and all(registry.knows(o["apiVersion"].rpartition("/")[0], o["kind"]) for o in docs)
    assert registry.validate(docs) == []


def test_they_sync_main_and_the_platform_and_tenants_folders() -> None:
    flux = {(o["kind"], o["metadata"]["name"]): o for o in objects("flux.yaml")}
    assert flux["GitRepository", "gpufleet-desired-state"]["spec"]["ref"] == {"branch": "main"}
    paths = {o["spec"]["path"] for (kind, _), o in flux.items() if kind == "Kustomization"}
    assert paths == {"./clusters/default/platform", "./clusters/default/tenants"}
    assert all(o["spec"]["prune"] for (kind, _), o in flux.items() if kind == "Kustomization")
    (argo,) = objects("argocd.yaml")
    assert {e["path"] for e in argo["spec"]["generators"][0]["list"]["elements"]} == {
        "clusters/default/platform", "clusters/default/tenants"}
    template = argo["spec"]["template"]["spec"]
    assert template["source"]["targetRevision"] == "main" and template["syncPolicy"]["automated"]["prune"]


def test_the_examples_are_what_render_sync_prints() -> None:
    """The examples cannot drift from the code that prints them (three stages, B2)."""
    from infra.manifests import to_yaml_stream
    from scheduling.clusters import sync_objects

    default = [sync_objects.SyncTarget("default", "clusters/default")]
    url = "ssh://git@git.example.com/platform/gpufleet-desired-state.git"
    for name, tool in (("flux.yaml", sync_objects.flux), ("argocd.yaml", sync_objects.argocd)):
        assert objects(name) == list(yaml.safe_load_all(to_yaml_stream(tool(default, url))))
