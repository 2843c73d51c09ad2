"""Rendered manifests: valid against upstream schemas, deterministic, labelled, in apply order."""

from __future__ import annotations

import copy

import pytest

from infra.manifests import kind_rank, ref, to_yaml_stream
from infra.schemas import SchemaRegistry
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, render_platform
from tests.support import factories
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db


@pytest.fixture
def registry() -> SchemaRegistry:
    return SchemaRegistry(need_reference(), "1.33")


@pytest.mark.parametrize("trust_level", ["untrusted", "standard", "trusted"])
def test_every_rendered_object_validates(registry, trust_level):
    tenant = factories.tenant(f"team-{trust_level}", trust_level, phase=Phase.APPROVED)
    manifests = desired_manifests(tenant)
    kinds = {m["kind"] for m in manifests}
    assert {"Namespace", "ResourceQuota", "LimitRange", "HelmRelease"} <= kinds
    assert registry.validate(manifests) == []
    assert registry.validate(render_platform(RenderContext.from_settings())) == []
    for manifest in manifests:
        labels = manifest["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpufleet"
        assert labels["gpufleet.io/tenant"] == tenant.slug
        # Namespaced objects live in the tenant's namespace; cluster-scoped ones (ClusterQueue...) have none.
        assert manifest["metadata"].get("namespace", "tenant-" + tenant.slug) == "tenant-" + tenant.slug
    namespaced = [m for m in manifests if m["kind"] in {"ResourceQuota", "LimitRange", "HelmRelease"}]
    assert all(m["metadata"]["namespace"] == "tenant-" + tenant.slug for m in namespaced)


def test_vcluster_values_are_checked_against_the_chart_schema(registry):
    tenant = factories.tenant("acme", phase=Phase.APPROVED)
    release = next(m for m in desired_manifests(tenant) if m["kind"] == "HelmRelease")
    assert release["spec"]["values"]["experimental"]["syncSettings"]["setOwner"] is False
    broken = copy.deepcopy(release)
    broken["spec"]["values"]["controlPlane"]["statefulSet"]["resourcez"] = {}
    problems = registry.validate([broken])
    assert problems and "resourcez" in problems[0].message


def test_misspelled_core_field_fails(registry):
    tenant = factories.tenant("acme", phase=Phase.APPROVED)
    quota = copy.deepcopy(next(m for m in desired_manifests(tenant) if m["kind"] == "ResourceQuota"))
    quota["spec"]["hardd"] = quota["spec"].pop("hard")
    assert registry.validate([quota])


def test_render_is_deterministic_and_sorted():
    tenant = factories.tenant("acme", "trusted", phase=Phase.APPROVED)
    first = to_yaml_stream(desired_manifests(tenant))
    second = to_yaml_stream(desired_manifests(tenant))
    assert first == second
    ranks = [kind_rank(m["kind"]) for m in desired_manifests(tenant)]
    assert ranks == sorted(ranks)
    keys = [ref(m).key for m in desired_manifests(tenant)]
    assert len(keys) == len(set(keys))


def test_suspended_tenant_gets_no_gpu_quota():
    tenant = factories.tenant("acme", phase=Phase.SUSPENDED)
    quota = next(m for m in desired_manifests(tenant) if m["kind"] == "ResourceQuota")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


@pytest.mark.parametrize("phase", [Phase.REQUESTED, Phase.REJECTED, Phase.DEPROVISIONING, Phase.DELETED])
def test_nothing_is_desired_outside_live_phases(phase):
    tenant = factories.tenant("acme", phase=phase)
    assert desired_manifests(tenant) == []


def test_invalid_manifest_is_never_written(gitops_repo, monkeypatch):
    from tenants import reconcile, render

    tenant = factories.tenant("acme", phase=Phase.APPROVED)
    original = render.vcluster_values

    def typo(view, ctx):
        values = original(view, ctx)
        values["controlPlane"]["distro"]["k8z"] = {}
        return values

    monkeypatch.setattr(render, "vcluster_values", typo)
    need_reference()
    outcome = reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.FAILED
    cond = tenant.condition("Ready")
    assert cond["reason"] == "InvalidManifest" and "k8z" in cond["message"]
    assert outcome.problems
    assert not (gitops_repo / "clusters/default/tenants" / "acme").exists()
