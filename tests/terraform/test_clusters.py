"""gpufleet_cluster and gpufleet_placement with the real `terraform` binary against a live gpufleet: register,
no perpetual diff, change in place (If-Match), place a tenant through an approved request, a trust refusal
as a diagnostic on `cluster`, import, destroy."""

from __future__ import annotations

import pytest

from gpufleet.audit.models import AuditEvent
from scheduling.clusters.models import Cluster, Placement
from tests.support import factories

from .harness import Workspace

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def config(region_name: str = "Europe (Ireland)", dev_tenant: str = "") -> str:
    hcl = f'''
provider "gpufleet" {{}}

resource "gpufleet_cluster" "training" {{
  name              = "training"
  purpose           = "training"
  region            = "eu-west-1"
  region_name       = "{region_name}"
  zones             = ["eu-west-1a", "eu-west-1b"]
  kubeconfig_secret = "gpufleet-cluster-training"
}}

resource "gpufleet_cluster" "dev" {{
  name         = "dev"
  purpose      = "dev"
  trust_levels = ["untrusted"]
}}

resource "gpufleet_placement" "acme_training" {{
  tenant  = "acme"
  cluster = gpufleet_cluster.training.name
  reason  = "training runs"
}}
'''
    if dev_tenant:
        hcl += f'''
resource "gpufleet_placement" "dev" {{
  tenant  = "{dev_tenant}"
  cluster = gpufleet_cluster.dev.name
}}
'''
    return hcl


def test_clusters_and_placements_from_apply_to_destroy(platform, tmp_path) -> None:
    acme = factories.tenant("acme", "standard", phase="ready", owner=platform.owner)
    ws = Workspace(tmp_path, platform.url, platform.admin_token)
    ws.write(config())
    ws.apply()
    training = Cluster.objects.get(name="training")
    assert (training.purpose, training.region, training.zones, training.kubeconfig_secret) == (
        "training", "eu-west-1", ["eu-west-1a", "eu-west-1b"], "gpufleet-cluster-training")
    assert Placement.objects.filter(tenant=acme, cluster=training, home=False).exists()
    assert AuditEvent.objects.filter(action="placement.approve").count() == 1
    code, text = ws.plan()
    assert code == 0, text

    ws.write(config(region_name="Ireland"))
    code, text = ws.plan()
    assert code == 2 and "gpufleet_cluster.training will be updated in-place" in text, text
    ws.apply()
    assert Cluster.objects.get(name="training").region_name == "Ireland"
    assert ws.plan()[0] == 0

    # Trust: a standard tenant on the untrusted-only cluster is refused, on the `cluster` attribute.
    ws.write(config(region_name="Ireland", dev_tenant="acme"))
    result = ws.apply(check=False)
    assert result.returncode != 0
    assert "cluster 'dev' hosts only untrusted tenants" in result.stderr, result.stderr
    assert not Placement.objects.filter(tenant=acme, cluster__name="dev").exists()

    # Import a cluster registered elsewhere.
    ws.write(config(region_name="Ireland") + '''
resource "gpufleet_cluster" "inference" {
  name    = "inference"
  purpose = "inference"
}
''')
    Cluster.objects.create(name="inference", purpose="inference")
    ws.run("import", "gpufleet_cluster.inference", "inference")
    assert ws.plan()[0] == 0

    ws.run("destroy", "-auto-approve", "-input=false")
    assert not Placement.objects.filter(tenant=acme, cluster__name="training").exists()
    assert not Cluster.objects.filter(name__in=["training", "dev", "inference"]).exists()


def test_a_tenant_owner_token_proposes_and_is_told_it_waits_for_review(platform, tmp_path) -> None:
    factories.tenant("acme", "standard", phase="ready", owner=platform.owner)
    Cluster.objects.create(name="training", purpose="training")
    ws = Workspace(tmp_path, platform.url, platform.owner_token)
    ws.write('''
provider "gpufleet" {}

resource "gpufleet_placement" "p" {
  tenant  = "acme"
  cluster = "training"
}
''')
    result = ws.apply(check=False)
    assert result.returncode != 0
    assert "was proposed and waits for a platform admin's review" in result.stderr, result.stderr
    assert not Placement.objects.filter(tenant__slug="acme", cluster__name="training").exists()
