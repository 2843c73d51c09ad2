"""Platform admins edit the policy in the Django admin; the same rules apply and bad input saves nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from gpufleet.audit.models import AuditEvent
from tenants.isolation import actions
from tenants.isolation.models import AllocationPolicy, TenantIsolation
from tests.support import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.test", "pw-for-tests")
    client = Client()
    client.force_login(root)
    return client


def test_policy_edit_validates_and_goes_through_the_action(admin_client: Client) -> None:
    row = AllocationPolicy.objects.get(trust_level="standard")
    url = f"/admin/tenants/allocationpolicy/{row.pk}/change/"
    assert admin_client.get(url).status_code == 200
    bad = admin_client.post(url, {"allowed_modes": '["whole", "vgpu"]', "world_egress": "on"})
    assert bad.status_code == 200 and "unknown mode(s) vgpu" in bad.content.decode()
    row.refresh_from_db()
    assert row.allowed_modes == ["whole", "mig"]
    ok = admin_client.post(url, {"allowed_modes": '["mig", "whole"]'})  # world_egress unchecked
    assert ok.status_code == 302
    row.refresh_from_db()
    assert (row.allowed_modes, row.world_egress) == (["whole", "mig"], False)
    assert AuditEvent.objects.filter(action="allocation_policy.update").count() == 1


def test_tenant_isolation_edit_refuses_widening(admin_client: Client) -> None:
    tenant = factories.tenant("acme", "standard")
    iso = actions.set_tenant_isolation(tenant, allowed_modes=["whole"])
    url = f"/admin/tenants/tenantisolation/{iso.pk}/change/"
    bad = admin_client.post(url, {"allowed_modes": '["whole", "hami"]', "egress_cidrs": "[]", "egress_fqdns": "[]"})
    assert bad.status_code == 200 and "can only tighten" in bad.content.decode()
    bad = admin_client.post(url, {"allowed_modes": '["whole"]', "egress_cidrs": '["10.0.0.1/8"]',
                                  "egress_fqdns": "[]"})
    assert bad.status_code == 200 and "is not a CIDR" in bad.content.decode()
    assert TenantIsolation.objects.get(pk=iso.pk).egress_cidrs == []
    ok = admin_client.post(url, {"allowed_modes": '["mig"]', "egress_cidrs": '["10.0.0.0/8"]', "egress_fqdns": "[]"})
    assert ok.status_code == 302
    iso.refresh_from_db()
    assert (iso.allowed_modes, iso.egress_cidrs) == (["mig"], ["10.0.0.0/8"])
