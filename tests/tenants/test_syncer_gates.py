"""Issue 26, B3: a vCluster syncer that strips Kueue's scheduling gates is reported -- on every tenant (condition
GpuWorkloads, shown in the portal), in what the tenant's GPU pods meet (a Kyverno refusal with the reason) and by
`gpufleet doctor` (tests/kube/test_doctor.py) -- and never left to Kueue deleting pods."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tenants import actions, reconcile, syncer_gates
from tenants.models import Phase
from tests.portal.conftest import signed_in
from tests.support import factories

PATCHED = "registry.example.com/loft-sh/vcluster-pro:0.36.1-gates"


@pytest.mark.parametrize(("version", "image", "keeps"), [
    ("0.36.1", "", False),  # the pinned release: diff.go:163 copies the virtual pod's gates
    ("0.20.0", "", False),
    ("v0.36.1", PATCHED, True),  # a syncer built with the fix (commit 3a272b45a)
    ("0.37.0", "", False),  # a later release is not trusted until FIXED_RELEASE names it
])
def test_which_syncer_keeps_the_gates(version: str, image: str, keeps: bool) -> None:
    assert syncer_gates.keeps_host_gates(version, image) is keeps
    assert (syncer_gates.problem(version, image) == "") is keeps


def test_a_release_with_the_fix_is_trusted_once_named(monkeypatch) -> None:
    monkeypatch.setattr(syncer_gates, "FIXED_RELEASE", (0, 37, 0))
    assert syncer_gates.keeps_host_gates("0.37.0", "") and syncer_gates.keeps_host_gates("v0.38.2-rc.1", "")
    assert not syncer_gates.keeps_host_gates("0.36.1", "")


@pytest.mark.django_db
def test_every_tenant_says_why_its_gpu_pods_are_refused_and_the_portal_shows_it(settings) -> None:
    settings.GPUFLEET_VCLUSTER_SYNCER_IMAGE = ""
    owner = factories.user("ada")
    tenant = factories.tenant("acme", "standard", owner=owner)
    actions.approve(tenant)
    reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY
    condition = tenant.condition("GpuWorkloads")
    assert (condition["status"], condition["reason"]) == ("False", "VClusterStripsSchedulingGates")
    assert "diff.go:163" in condition["message"] and "GPUFLEET_VCLUSTER_SYNCER_IMAGE" in condition["message"]
    rendered = reconcile.desired_manifests(tenant)
    policy = next(m for m in rendered if m["metadata"]["name"] == "gpufleet-gpu-syncer-gates")
    assert "GPU pods are refused" in policy["spec"]["rules"][0]["validate"]["message"]
    page = signed_in(owner).get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert "GpuWorkloads" in page and "VClusterStripsSchedulingGates" in page

    settings.GPUFLEET_VCLUSTER_SYNCER_IMAGE = PATCHED
    reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.condition("GpuWorkloads")["status"] == "True"
    assert not [m for m in reconcile.desired_manifests(tenant) if m["metadata"]["name"] == "gpufleet-gpu-syncer-gates"]
