"""The reconcile's OpenBao step against the real server: provisioned with the tenant, revoked on delete."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from infra.openbao import OpenBao
from tenants import actions, reconcile, teardown
from tenants import secrets as tenant_secrets
from tenants.models import Phase, Tenant
from tests.support import factories

from .conftest import BaoServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def openbao(settings, bao_server: BaoServer) -> OpenBao:
    settings.GPUFLEET_OPENBAO_ADDR = bao_server.addr
    settings.GPUFLEET_OPENBAO_TOKEN = bao_server.root_token
    return OpenBao.connect(bao_server.addr, token=bao_server.root_token)


def test_not_configured_is_skipped_and_said_so(settings) -> None:
    settings.GPUFLEET_OPENBAO_ADDR = ""
    tenant = factories.tenant("plain", "standard")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    tenant.refresh_from_db()
    cond = tenant.condition("Secrets")
    assert cond["status"] == "False" and cond["reason"] == "NotConfigured"
    assert "GPUFLEET_OPENBAO_ADDR" in cond["message"]


def test_provisioned_with_the_tenant_and_revoked_on_delete(openbao: OpenBao, monkeypatch) -> None:
    tenant = factories.tenant("vaulted", "trusted")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    tenant.refresh_from_db()
    assert tenant.condition("Secrets")["reason"] == "Provisioned"
    # The only data yet: the vCluster's serving CA the platform issued (issue 26, B6); revoked with the rest.
    assert openbao.tenant_status("vaulted") == {"policy": True, "role": True, "data": True}
    assert openbao.read_vcluster_ca("vaulted")["tls.crt"].startswith("-----BEGIN CERTIFICATE-----")
    tenant_secrets.store_vcluster_admin("vaulted", "kubeconfig-for-the-platform")
    assert tenant_secrets.read_vcluster_admin("vaulted") == "kubeconfig-for-the-platform"
    # Nothing of it in the database.
    assert "kubeconfig-for-the-platform" not in str(list(Tenant.objects.filter(pk=tenant.pk).values()))

    actions.delete(Tenant.objects.get(pk=tenant.pk))
    # GitOps plan: one commit prunes everything, then OpenBao. Crash in the OpenBao step once.
    real = teardown.STEPS["revoke-secrets"]

    def crash(t: teardown.Teardown) -> None:
        raise RuntimeError("worker killed")

    monkeypatch.setattr(teardown, "STEPS", MappingProxyType({**teardown.STEPS, "revoke-secrets": crash}))
    with pytest.raises(RuntimeError):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DEPROVISIONING
    assert tenant.condition("Deprovisioning")["step"] == "prune-all"
    assert openbao.tenant_status("vaulted")["policy"] is True

    monkeypatch.setattr(teardown, "STEPS", MappingProxyType({**teardown.STEPS, "revoke-secrets": real}))
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.DELETED
    assert openbao.tenant_status("vaulted") == {"policy": False, "role": False, "data": False}
    tenant.refresh_from_db()
    assert tenant.condition("Secrets")["reason"] == "Revoked"


def test_openbao_down_is_retried_not_failed(settings) -> None:
    from infra.errors import TransientError
    from tests.support.services import free_port

    settings.GPUFLEET_OPENBAO_ADDR = f"http://127.0.0.1:{free_port()}"
    settings.GPUFLEET_OPENBAO_TOKEN = "x"
    tenant = factories.tenant("later", "standard")
    actions.approve(tenant)
    with pytest.raises(TransientError, match="OpenBao"):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.PROVISIONING
    assert tenant.condition("Ready")["reason"] == "Retrying"
