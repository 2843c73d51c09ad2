"""The Terraform provider end to end: the real `terraform` 1.11 binary, the provider of this checkout
(through dev_overrides), and a real gpufleet (live server, PostgreSQL, eager tasks, GitOps backend).

One workspace walks the whole life of a configuration (apply, no perpetual diff, update in place, drift,
import, replacement, destroy); separate tests cover diagnostics on the right attribute and retries.
"""

from __future__ import annotations

import re

import pytest

from gpufleet.accounts.models import ApiToken
from gpufleet.audit.models import AuditEvent
from scheduling import actions as sched
from scheduling.models import InferenceEndpoint, Quota
from tenants.models import Membership, Tenant
from tests.support import factories

from .harness import Fault, FaultProxy, Workspace

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def config(slug: str = "vision", nominal: int = 2, role: str = "member", display_name: str = "Vision research",
           token: bool = True, trust_level: str = "standard") -> str:
    hcl = f'''
provider "gpufleet" {{}}

data "gpufleet_flavors" "whole" {{
  mode = "whole"
}}

resource "gpufleet_tenant" "t" {{
  slug         = "{slug}"
  display_name = "{display_name}"
  trust_level  = "{trust_level}"
  approve      = true
}}

resource "gpufleet_tenant_member" "bob" {{
  tenant = gpufleet_tenant.t.slug
  user   = "bob"
  role   = "{role}"
}}

resource "gpufleet_quota" "q" {{
  tenant          = gpufleet_tenant.t.slug
  flavor          = data.gpufleet_flavors.whole.flavors[0].name
  nominal         = {nominal}
  borrowing_limit = 2
}}

resource "gpufleet_inference_endpoint" "chat" {{
  tenant          = gpufleet_tenant.t.slug
  name            = "chat"
  model           = "meta-llama/Llama-3.1-8B-Instruct"
  tier            = "standard"
  kv_cache_target = 0.8
}}

data "gpufleet_tenant" "t" {{
  slug = gpufleet_tenant.t.slug
}}

data "gpufleet_kubeconfig" "t" {{
  tenant = gpufleet_tenant.t.slug
}}

output "flavors" {{
  value = data.gpufleet_flavors.whole.flavors
}}

output "phase" {{
  value = data.gpufleet_tenant.t.phase
}}

output "kubeconfig" {{
  value = data.gpufleet_kubeconfig.t.kubeconfig
}}

output "namespace" {{
  value = gpufleet_tenant.t.namespace
}}

output "endpoint_gated" {{
  value = gpufleet_inference_endpoint.chat.gated
}}
'''
    if token:
        hcl += '''
resource "gpufleet_api_token" "ci" {
  name       = "ci-pipeline"
  expires_at = "2099-01-01T00:00:00Z"
}

output "ci_token" {
  value     = gpufleet_api_token.ci.token
  sensitive = true
}
'''
    return hcl


def test_a_configuration_lives_from_apply_to_destroy(platform, tmp_path):
    ws = Workspace(tmp_path, platform.url, platform.admin_token)

    # Apply from scratch: a platform team bootstraps an approved, ready tenant in one apply.
    ws.write(config())
    ws.apply()
    tenant = Tenant.objects.get(slug="vision")
    assert tenant.phase == "ready" and tenant.display_name == "Vision research"
    quota = Quota.objects.get(tenant=tenant)
    assert (quota.flavor.name, quota.nominal, quota.borrowing_limit, quota.lending_limit) == ("a100", 2, 2, None)
    endpoint = InferenceEndpoint.objects.get(tenant=tenant)
    assert (endpoint.name, endpoint.gated) == ("chat", False)
    assert Membership.objects.get(tenant=tenant, user__username="bob").role == "member"
    out = ws.outputs()
    assert out["flavors"] == [{"name": "a100", "mode": "whole", "gpu_model": "a100-80gb"}]
    assert out["phase"] == "ready" and out["namespace"] == "tenant-vision"
    assert out["endpoint_gated"] is False  # computed: the API's default, and no diff on the next plan
    assert "https://sso.example.test" in out["kubeconfig"] and "vision" in out["kubeconfig"]
    assert out["ci_token"].startswith("gpf_")

    # No perpetual diff: defaults, number formats (0.8 vs "0.80"), computed fields.
    code, text = ws.plan()
    assert code == 0, text

    # Update in place: quota, member role, display name, trust level (platform admin token).
    ws.write(config(nominal=4, role="admin", display_name="Vision", trust_level="trusted"))
    code, text = ws.plan()
    assert code == 2 and "gpufleet_quota.q will be updated in-place" in text, text
    assert "gpufleet_tenant.t will be updated in-place" in text and "must be replaced" not in text
    ws.apply()
    assert Quota.objects.get(tenant=tenant).nominal == 4
    assert Membership.objects.get(tenant=tenant, user__username="bob").role == "admin"
    updated = Tenant.objects.get(pk=tenant.pk)
    assert (updated.display_name, updated.trust_level, updated.phase) == ("Vision", "trusted", "ready")
    assert updated.observed_generation == updated.generation
    assert ws.plan()[0] == 0

    # Deleted outside Terraform: planned for re-creation, and re-created.
    sched.delete_endpoint(InferenceEndpoint.objects.get(tenant=tenant, name="chat"))
    code, text = ws.plan()
    assert code == 2 and "gpufleet_inference_endpoint.chat will be created" in text, text
    ws.apply()
    assert InferenceEndpoint.objects.filter(tenant=tenant, name="chat").exists()

    # Import by natural key, then plan shows no changes.
    for address in ("gpufleet_quota.q", "gpufleet_tenant_member.bob", "gpufleet_inference_endpoint.chat",
                    "gpufleet_tenant.t"):
        ws.run("state", "rm", address)
    ws.run("import", "-input=false", "gpufleet_tenant.t", "vision")
    ws.run("import", "-input=false", "gpufleet_quota.q", "vision/a100")
    ws.run("import", "-input=false", "gpufleet_tenant_member.bob", "vision/bob")
    ws.run("import", "-input=false", "gpufleet_inference_endpoint.chat", "vision/chat")
    code, text = ws.plan()
    assert code == 0, text

    # Changing the slug replaces the tenant (and what hangs off it).
    ws.write(config(slug="vision-two", nominal=4, role="admin", display_name="Vision", trust_level="trusted"))
    code, text = ws.plan()
    assert code == 2 and "gpufleet_tenant.t must be replaced" in text, text
    assert re.search(r"slug\s+= \"vision\" -> \"vision-two\" # forces replacement", text), text
    ws.apply()
    assert Tenant.objects.get(slug="vision").phase == "deleted"
    second = Tenant.objects.get(slug="vision-two")
    assert second.phase == "ready" and Quota.objects.get(tenant=second).nominal == 4
    assert ws.plan()[0] == 0

    # Destroy removes everything, dependents before the tenant.
    first_event = AuditEvent.objects.order_by("-id").first().id
    ws.run("destroy", "-auto-approve", "-input=false")
    assert Tenant.objects.get(slug="vision-two").phase == "deleted"
    assert not Quota.objects.exists() and not InferenceEndpoint.objects.exists()
    assert not Membership.objects.filter(user__username="bob").exists()
    actions = list(AuditEvent.objects.filter(id__gt=first_event, tenant_slug="vision-two")
                   .order_by("id").values_list("action", flat=True))
    tenant_delete = actions.index("tenant.delete")
    for dependent in ("quota.delete", "endpoint.delete", "membership.remove"):
        assert actions.index(dependent) < tenant_delete, actions
    assert ApiToken.objects.get(name="ci-pipeline").revoked_at is not None


def test_api_errors_are_diagnostics_on_the_attribute(platform, tmp_path):
    factories.tenant("vision", owner=platform.owner, phase="ready")
    ws = Workspace(tmp_path, platform.url, platform.admin_token)
    hcl = '''
provider "gpufleet" {}

resource "gpufleet_tenant" "bad" {
  slug        = "Bad-Slug"
  trust_level = "root"
}

resource "gpufleet_quota" "q" {
  tenant  = "vision"
  flavor  = "a100"
  nominal = -1
}
'''
    ws.write(hcl)
    result = ws.apply(check=False)
    assert result.returncode == 1
    errors = result.stderr
    # Each reason is reported on its attribute: Terraform quotes that attribute's line of the config.
    # A negative quota is refused at plan time (issue 28), on its attribute, before anything is created.
    assert re.search(r"Error: nominal must be a whole number of units, 0 or more \(got -1\).*?\n.*?\n.*?nominal = -1",
                     errors, re.S), errors
    ws.write(hcl.replace("nominal = -1", "nominal = 100000"))  # valid at plan; the API refuses it
    errors = ws.apply(check=False).stderr
    assert re.search(r"Error: creating the tenant: trust_level must be one of untrusted, standard, trusted.*?"
                     r'trust_level = "root"', errors, re.S), errors
    assert re.search(r'Error: creating the tenant: slug must be lowercase.*?slug\s+= "Bad-Slug"', errors, re.S), errors
    assert not Tenant.objects.filter(slug__iexact="bad-slug").exists() and not Quota.objects.exists()


def test_a_tenant_admin_is_told_to_use_a_quota_request(platform, tmp_path):
    factories.tenant("vision", owner=platform.owner, phase="ready")
    ws = Workspace(tmp_path, platform.url, platform.owner_token)
    ws.write('''
provider "gpufleet" {}

resource "gpufleet_tenant" "mine" {
  slug        = "lead-team"
  trust_level = "standard"
}

resource "gpufleet_quota" "q" {
  tenant  = "vision"
  flavor  = "a100"
  nominal = 1
}
''')
    result = ws.apply(check=False)
    assert result.returncode == 1
    assert "quota request" in result.stderr and "platform-admin token" in result.stderr, result.stderr
    # A tenant that needs approval is reported as such (a warning), created, and not retried in a loop.
    assert "awaits approval by a platform admin" in result.stdout + result.stderr
    assert Tenant.objects.get(slug="lead-team").phase == "requested"
    state = ws.run("state", "list").stdout.split()
    assert state == ["gpufleet_tenant.mine"]


def test_409_429_503_are_retried_and_a_lost_answer_creates_once(platform, tmp_path):
    faults = [
        # The create reaches the server but its answer is lost: the retry carries the same Idempotency-Key.
        Fault("POST", "/api/v1/tenants/", 503, forward=True),
        Fault("POST", "/api/v1/quotas/", 429, retry_after="1"),
        Fault("POST", "/api/v1/members/", 409),
        Fault("GET", "/api/v1/flavors/", 503),
    ]
    with FaultProxy(platform.url, faults) as proxy:
        ws = Workspace(tmp_path, proxy.url, platform.admin_token)
        ws.write(config(token=False))
        ws.apply()
        code, text = ws.plan()
    assert code == 0, text
    assert proxy.faults == [], "every fault was served"
    injected = [(m, p.split("?")[0], s) for m, p, s in proxy.log if s in (409, 429, 503)]
    assert ("POST", "/api/v1/tenants/", 503) in injected and ("POST", "/api/v1/quotas/", 429) in injected
    assert ("POST", "/api/v1/members/", 409) in injected
    assert Tenant.objects.filter(slug="vision").count() == 1 and Tenant.objects.get(slug="vision").phase == "ready"
    assert Quota.objects.get().nominal == 2


def test_the_shipped_example_plans_and_applies(platform, tmp_path):
    """examples/terraform/main.tf as a new user would run it: plan accepted, one apply, nothing left to do."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "terraform" / "main.tf"
    ws = Workspace(tmp_path, platform.url, platform.admin_token)
    (ws.root / "config" / "main.tf").write_text(example.read_text())
    code, text = ws.plan()
    assert code == 2 and "Plan: 4 to add, 0 to change, 0 to destroy." in text, text
    ws.apply()
    tenant = Tenant.objects.get(slug="tf-example")  # not one of the demo's tenants
    assert tenant.phase == "ready" and Quota.objects.get(tenant=tenant).nominal == 2
    assert InferenceEndpoint.objects.get(tenant=tenant).tier.name == "standard"
    assert ws.plan()[0] == 0


def test_usage_data_source_sums_a_period(platform, tmp_path):
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from billing.models import UsageRecord
    from scheduling.models import Flavor

    tenant = factories.tenant("vision", owner=platform.owner, phase="ready")
    flavor = Flavor.objects.get(name="a100")
    start = datetime(2026, 10, 3, 9, tzinfo=UTC)  # explicit past data: nothing depends on today's date
    for offset, seconds in ((0, "3600"), (1, "1800.5")):
        at = start + timedelta(hours=offset)
        UsageRecord.objects.create(tenant=tenant, flavor=flavor, hour=at, unit_seconds=Decimal(seconds),
                                   gpu_equivalent_seconds=Decimal(seconds), collected_at=at + timedelta(hours=1),
                                   window_start=at, window_end=at + timedelta(hours=1))
    ws = Workspace(tmp_path, platform.url, platform.owner_token)
    ws.write('''
provider "gpufleet" {}

data "gpufleet_usage" "october" {
  tenant = "vision"
  period = "2026-10"
}

output "usage" {
  value = data.gpufleet_usage.october
}
''')
    ws.apply()
    usage = ws.outputs()["usage"]
    assert usage["gpu_seconds"] == 5400.5 and usage["unit_seconds"] == 5400.5
    assert usage["cost"] is None and usage["currency"] is None  # no invoice drafted for the period
