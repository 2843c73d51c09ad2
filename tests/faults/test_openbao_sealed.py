"""OpenBao sealed, then stopped, while a tenant is provisioned and torn down (a real `bao server -dev`).

What must hold: the tenant is never Ready without its secrets step, never Deleted with its policy
and role still in OpenBao; the condition says why; once OpenBao is back the same reconcile finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hvac
import pytest

from infra.errors import TransientError
from infra.openbao import OpenBao
from tenants import actions, reconcile
from tenants.models import Phase, Tenant
from tests.secrets.conftest import bao_binary, throwaway_ca_pem
from tests.support import factories
from tests.support.services import free_port, running, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.service]


@pytest.fixture(autouse=True)
def _reconcile_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test runs each reconcile itself; nothing is published to a broker another suite's worker reads.
    monkeypatch.setattr("tenants.actions._enqueue_reconcile", lambda tenant_id: None)


class Bao:
    """A private server (the session one is shared and must not be sealed).

    Not `-dev`: dev mode prints its unseal key only in a banner and puts its cluster listener on the
    API port + 1, which another process may hold (a CI run once failed on exactly that: the bind
    failed and the banner never came). Here both ports are chosen free, the server starts sealed
    and uninitialised, and the test initialises it over the API, which hands back the unseal key
    and the root token: nothing is scraped from a log.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.cluster_port = free_port()
        while self.cluster_port == self.port:
            self.cluster_port = free_port()
        self.addr = f"http://127.0.0.1:{self.port}"
        self.home = tmp_path / "bao"
        self.home.mkdir()
        self.log = self.home / "bao.log"
        self.config = self.home / "bao.hcl"
        self.config.write_text(
            'storage "inmem" {}\n'
            'listener "tcp" {\n'
            f'  address = "127.0.0.1:{self.port}"\n'
            f'  cluster_address = "127.0.0.1:{self.cluster_port}"\n'
            "  tls_disable = true\n"
            "}\n"
            "disable_mlock = true\n"
            f'api_addr = "{self.addr}"\n'
            f'cluster_addr = "https://127.0.0.1:{self.cluster_port}"\n'
        )
        self.root_token = ""
        self.unseal_key = ""

    def client(self) -> hvac.Client:
        return hvac.Client(url=self.addr, token=self.root_token or None, timeout=5)

    def initialise(self) -> None:
        keys = self.client().sys.initialize(secret_shares=1, secret_threshold=1)
        self.root_token, self.unseal_key = keys["root_token"], keys["keys"][0]
        self.unseal()

    def seal(self) -> None:
        self.client().sys.seal()
        assert self.client().sys.is_sealed()

    def unseal(self) -> None:
        self.client().sys.submit_unseal_key(self.unseal_key)
        wait_for(lambda: not self.client().sys.is_sealed(), timeout=15, what="OpenBao unsealed")


def _answers(server: Bao) -> bool:
    try:
        server.client().sys.read_health_status(method="GET")
    except Exception:  # not listening yet
        return False
    return True


@pytest.fixture
def bao(tmp_path: Path, settings) -> Iterator[tuple[Bao, object]]:
    server = Bao(tmp_path)
    argv = [bao_binary(), "server", f"-config={server.config}"]
    env = {"HOME": str(server.home), "PATH": "/usr/bin:/bin"}
    with running(argv, server.log, env=env) as proc:
        wait_for(lambda: _answers(server), timeout=30, what=f"bao server (log: {server.log})")
        server.initialise()
        root = server.client()  # the operator's one-time setup, as in tests/secrets/conftest.py
        root.sys.enable_secrets_engine("kv", path="secret", options={"version": "2"})
        root.sys.enable_auth_method("kubernetes", path="kubernetes")
        root.auth.kubernetes.configure(kubernetes_host="https://127.0.0.1:6443", kubernetes_ca_cert=throwaway_ca_pem(),
                                       disable_local_ca_jwt=True, mount_point="kubernetes")
        settings.GPUFLEET_OPENBAO_ADDR = server.addr
        settings.GPUFLEET_OPENBAO_TOKEN = server.root_token
        yield server, proc


def test_sealed_during_provisioning_then_unsealed(bao) -> None:
    server, _ = bao
    tenant = factories.tenant("sealed", "trusted")
    actions.approve(tenant)
    server.seal()
    with pytest.raises(TransientError, match="OpenBao"):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.PROVISIONING  # not Ready, not Failed: retried
    assert tenant.condition("Ready")["status"] != "True"
    assert tenant.condition("Ready")["reason"] == "Retrying"
    assert "OpenBao" in tenant.condition("Ready")["message"]

    server.unseal()
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    tenant.refresh_from_db()
    assert tenant.condition("Secrets")["reason"] == "Provisioned"
    assert OpenBao.connect(server.addr, token=server.root_token).tenant_status("sealed")["policy"] is True


def test_down_during_teardown_keeps_the_tenant_deprovisioning_until_it_is_back(bao, settings) -> None:
    server, proc = bao
    tenant = factories.tenant("gone", "trusted")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk).phase == Phase.READY
    actions.delete(Tenant.objects.get(pk=tenant.pk))

    server.seal()
    with pytest.raises(TransientError, match="OpenBao"):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DEPROVISIONING  # never Deleted while its policy and role remain

    stop(proc)  # and now OpenBao is not even there
    with pytest.raises(TransientError, match="OpenBao"):
        reconcile.reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DEPROVISIONING
    assert tenant.condition("Deprovisioning")["step"] == "prune-all"  # the last step done; revoke is next
    assert "OpenBao" in tenant.condition("Ready")["message"]
