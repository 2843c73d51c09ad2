"""The allocation policy is data: seeded defaults, admin edits, tighten-only overrides, clear errors."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from gpufleet.core.errors import ActionError
from tenants import actions as tenant_actions
from tenants import reconcile
from tenants.isolation import actions, impact, policy
from tenants.isolation.models import AllocationPolicy, TenantIsolation
from tenants.models import Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_migration_seeds_the_defaults() -> None:
    rows = {r.trust_level: (r.allowed_modes, r.world_egress) for r in AllocationPolicy.objects.all()}
    assert rows == {"untrusted": (["whole"], False), "standard": (["whole", "mig"], True),
                    "trusted": (["whole", "mig", "hami"], True)}


def test_allowed_modes_follow_level_and_override() -> None:
    tenant = factories.tenant("acme", "trusted")
    assert policy.allowed_modes(tenant) == {"whole", "mig", "hami"}
    actions.set_tenant_isolation(tenant, allowed_modes=["whole"])
    assert policy.allowed_modes(tenant) == {"whole"}
    actions.set_level_policy("trusted", allowed_modes=["mig", "hami"])
    assert policy.allowed_modes(tenant) == set()  # the override only ever narrows
    actions.set_tenant_isolation(tenant, allowed_modes=None)
    assert policy.allowed_modes(tenant) == {"mig", "hami"}


def test_widening_override_is_refused_naming_the_field() -> None:
    tenant = factories.tenant("acme", "untrusted")
    with pytest.raises(ActionError) as err:
        actions.set_tenant_isolation(tenant, allowed_modes=["whole", "hami"])
    assert "allowed_modes" in err.value.errors
    assert "hami" in err.value.errors["allowed_modes"][0]
    assert not TenantIsolation.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("egress_cidrs", ["10.0.0.1/8"]),  # host bits set
        ("egress_cidrs", ["0.0.0.0/0"]),
        ("egress_cidrs", ["not-a-cidr"]),
        ("egress_cidrs", "10.0.0.0/8"),
        ("egress_fqdns", ["*"]),
        ("egress_fqdns", ["evil*.com"]),
        ("egress_fqdns", ["UPPER.example.com"]),
        ("egress_fqdns", ["no_underscores.example.com"]),
        ("allowed_modes", ["whole", "vgpu"]),
    ],
)
def test_bad_input_changes_nothing(field: str, value: object) -> None:
    tenant = factories.tenant("acme", "trusted")
    with pytest.raises(ActionError) as err:
        actions.set_tenant_isolation(tenant, **{field: value})
    assert field in err.value.errors
    assert not TenantIsolation.objects.exists()


def test_valid_egress_exceptions_are_stored_sorted_and_bump_generation() -> None:
    tenant = factories.tenant("acme", "untrusted", phase=Phase.READY)
    iso = actions.set_tenant_isolation(tenant, egress_cidrs=["192.168.10.0/24", "10.0.0.0/8"],
                                       egress_fqdns=["pypi.org", "*.huggingface.co"])
    assert iso.egress_cidrs == ["10.0.0.0/8", "192.168.10.0/24"]
    tenant.refresh_from_db()
    assert tenant.generation == 2


@pytest.mark.django_db(transaction=True)
def test_lowering_trust_rerenders_and_reports_now_disallowed_modes(gitops_repo) -> None:
    tenant = factories.tenant("acme", "trusted")
    tenant_actions.approve(tenant)
    reconcile.reconcile_tenant(tenant.pk)
    policy_file = (gitops_repo / "clusters/default/tenants/acme"
                   / "policy.kyverno.io_tenant-acme_gpufleet-gpu-allocation-modes.yaml")
    assert "nvidia.com/gpumem" not in policy_file.read_text().split("value:")[1]
    tenant_actions.update(Tenant.objects.get(pk=tenant.pk), trust_level="untrusted")
    reconcile.reconcile_tenant(tenant.pk)
    text = policy_file.read_text()
    assert "nvidia.com/gpumem" in text and "nvidia.com/mig-*" in text
    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY and tenant.is_synced
    assert tenant.condition(impact.CONDITION)["status"] == "True"


@pytest.mark.django_db(transaction=True)
def test_lowering_trust_reports_configured_quotas_no_longer_admitted(gitops_repo) -> None:
    from scheduling.models import Flavor, GpuModel, Quota

    tenant = factories.tenant("acme", "trusted")
    tenant_actions.approve(tenant)
    a100 = GpuModel.objects.create(name="a100-80gb", dcgm_model_name="NVIDIA A100-SXM4-80GB", memory_mib=81920)
    mig = Flavor.objects.create(name="a100-mig-3g", gpu_model=a100, mode="mig", mig_profile="3g.40gb", capacity=14)
    whole = Flavor.objects.create(name="a100-whole", gpu_model=a100, mode="whole", capacity=8)
    Quota.objects.create(tenant=tenant, flavor=mig, nominal=4)
    Quota.objects.create(tenant=tenant, flavor=whole, nominal=2)
    reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.condition(impact.CONDITION)["status"] == "True"

    tenant_actions.update(tenant, trust_level="untrusted")
    outcome = reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    cond = tenant.condition(impact.CONDITION)
    assert (cond["status"], cond["reason"]) == ("False", "DisallowedModesConfigured"), outcome.summary
    assert "quota for flavor a100-mig-3g (mig, 4 nominal) is not admitted" in cond["message"]
    assert "a100-whole" not in cond["message"]
    assert "trust level untrusted allows whole" in cond["message"]


def test_render_command_shows_isolation_for_each_level(capsys, settings) -> None:
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    for level in ("untrusted", "standard", "trusted"):
        factories.tenant(f"t-{level}", level, phase=Phase.READY)
        call_command("render", "--tenant", f"t-{level}", "--validate")
        out = capsys.readouterr().out
        assert "kind: Policy" in out and "kind: CiliumNetworkPolicy" in out and "--oidc-issuer-url=" in out
        assert ("- world\n" in out) is (level != "untrusted")


def test_render_inputs_cost_two_queries_and_match_allowed_modes(django_assert_num_queries) -> None:
    from tenants.isolation.config import tenant_extras

    tenant = factories.tenant("acme", "trusted")
    actions.set_tenant_isolation(tenant, allowed_modes=["whole", "hami"], egress_fqdns=["pypi.org"])
    with django_assert_num_queries(2):
        iso = tenant_extras(tenant)["isolation"]
    assert iso.allowed_modes == frozenset(policy.allowed_modes(tenant)) == {"whole", "hami"}
    assert iso.world_egress and iso.egress_fqdns == ("pypi.org",)
