"""The fleet pass computes isolation's GpuModesAdmitted condition in bulk (three queries a chunk); it
must equal the per-tenant provider's for every tenant, and a stale one is never used."""

from __future__ import annotations

import pytest

from tenants import actions as tenant_actions
from tenants import reconcile
from tenants.isolation import actions, impact
from tenants.models import Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db


def _fleet():  # type: ignore[no-untyped-def]
    from scheduling.models import Flavor, GpuModel, Quota

    a100 = GpuModel.objects.create(name="a100-80gb", dcgm_model_name="NVIDIA A100-SXM4-80GB", memory_mib=81920)
    flavors = [Flavor.objects.create(name="a100-mig-3g", gpu_model=a100, mode="mig", mig_profile="3g.40gb",
                                     capacity=14),
               Flavor.objects.create(name="a100-whole", gpu_model=a100, mode="whole", capacity=8),
               Flavor.objects.create(name="a100-hami", gpu_model=a100, mode="hami", memory_percent=25,
                                     cores_percent=25, capacity=8)]
    tenants = []
    for i, level in enumerate(["untrusted", "standard", "trusted", "trusted", "standard", "untrusted"]):
        tenant = factories.tenant(f"many-{i}", level)
        for flavor in flavors[: i % 4]:
            Quota.objects.create(tenant=tenant, flavor=flavor, nominal=i + 1)
        tenants.append(tenant)
    actions.set_tenant_isolation(tenants[3], allowed_modes=["whole"])  # a per-tenant narrowing
    actions.set_level_policy("standard", allowed_modes=["whole"])  # an edited level row
    return list(Tenant.objects.filter(pk__in=[t.pk for t in tenants]).order_by("pk"))


def test_bulk_conditions_equal_the_per_tenant_provider(django_assert_max_num_queries) -> None:
    tenants = _fleet()
    with django_assert_max_num_queries(3):
        many = impact.gpu_modes_conditions_many(tenants)
    single = {t.pk: impact.gpu_modes_condition(t) for t in tenants}
    # Equal but for the transition time: each is "now" when computed (the merge keeps an older one).
    assert {pk: {**c, "lastTransitionTime": ""} for pk, c in many.items()} == {
        pk: {**c, "lastTransitionTime": ""} for pk, c in single.items()}
    assert {c["status"] for c in many.values()} == {"True", "False"}, "both outcomes are covered"


def test_a_prepared_condition_is_used_only_for_the_row_it_was_computed_from(gitops_repo) -> None:
    tenant = factories.tenant("prep", "trusted")
    tenant_actions.approve(tenant)
    tenant.refresh_from_db()
    marker = {"type": impact.CONDITION, "status": "True", "reason": "FromTheBatch", "message": "prepared",
              "lastTransitionTime": "2026-03-01T12:00:00+00:00"}
    provider = impact.gpu_modes_conditions_many  # the registry's `condition` contribution
    current = reconcile.Prepared(tenant.generation, tenant.trust_level, {provider: marker})
    reconcile.reconcile_tenant(tenant.pk, hints=reconcile.ReconcileHints(prepared=current))
    tenant.refresh_from_db()
    assert tenant.condition(impact.CONDITION)["reason"] == "FromTheBatch"
    # The row moved on (a spec change bumps the generation): the prepared condition is stale, not used.
    stale = reconcile.Prepared(tenant.generation - 1, tenant.trust_level, {provider: marker})
    reconcile.reconcile_tenant(tenant.pk, hints=reconcile.ReconcileHints(prepared=stale))
    tenant.refresh_from_db()
    assert tenant.condition(impact.CONDITION)["reason"] == "AllAllowed"
