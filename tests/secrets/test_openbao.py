"""infra.openbao against a real OpenBao server: isolation between tenants, idempotence, clean revoke."""

from __future__ import annotations

import uuid

import hvac
import pytest
from hvac import exceptions as hvac_errors

from infra.errors import PermanentError, TransientError
from infra.openbao import OpenBao
from tests.support.services import free_port

from .conftest import BaoServer


def slug(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def bao(bao_server: BaoServer) -> OpenBao:
    return OpenBao.connect(bao_server.addr, token=bao_server.root_token)


def tenant_token(bao_server: BaoServer, bao: OpenBao, tenant: str) -> hvac.Client:
    """A token carrying exactly the tenant's policy (what a Kubernetes-auth login would get)."""
    names = bao.names(tenant)
    created = bao_server.root().auth.token.create(policies=[names.policy], no_default_policy=True, ttl="10m")
    return bao_server.token_client(created["auth"]["client_token"])


def write(client: hvac.Client, path: str, value: str) -> None:
    client.secrets.kv.v2.create_or_update_secret(path=path, secret={"v": value}, mount_point="gpufleet")


def read(client: hvac.Client, path: str) -> str:
    got = client.secrets.kv.v2.read_secret_version(path=path, mount_point="gpufleet", raise_on_deleted_version=True)
    return got["data"]["data"]["v"]


def test_each_tenant_reaches_only_its_own_path(bao_server: BaoServer, bao: OpenBao) -> None:
    a, b = slug("a"), slug("b")
    bao.ensure_tenant(a)
    bao.ensure_tenant(b)
    as_a, as_b = tenant_token(bao_server, bao, a), tenant_token(bao_server, bao, b)

    write(as_a, f"tenants/{a}/db", "a-secret")
    assert read(as_a, f"tenants/{a}/db") == "a-secret"
    write(as_a, f"tenants/{a}/nested/deeper", "ok")
    assert read(as_a, f"tenants/{a}/nested/deeper") == "ok"
    write(as_b, f"tenants/{b}/db", "b-secret")

    with pytest.raises(hvac_errors.Forbidden):
        read(as_a, f"tenants/{b}/db")
    with pytest.raises(hvac_errors.Forbidden):
        write(as_a, f"tenants/{b}/db", "overwritten by a")
    with pytest.raises(hvac_errors.Forbidden):
        as_a.secrets.kv.v2.list_secrets(path="tenants", mount_point="gpufleet")
    # A sibling whose name starts with the tenant's slug is another path, not a sub-path.
    with pytest.raises(hvac_errors.Forbidden):
        write(as_a, f"tenants/{a}-evil/x", "no")
    assert read(as_b, f"tenants/{b}/db") == "b-secret"


def test_vcluster_admin_credential_is_stored_but_not_readable_by_the_tenant(
    bao_server: BaoServer, bao: OpenBao
) -> None:
    a = slug("a")
    bao.ensure_tenant(a)
    assert bao.read_vcluster_admin(a) is None
    bao.store_vcluster_admin(a, "apiVersion: v1\nkind: Config\n")
    assert bao.read_vcluster_admin(a) == "apiVersion: v1\nkind: Config\n"
    as_a = tenant_token(bao_server, bao, a)
    with pytest.raises(hvac_errors.Forbidden):
        as_a.secrets.kv.v2.read_secret_version(
            path=f"platform/tenants/{a}/vcluster-admin", mount_point="gpufleet", raise_on_deleted_version=True
        )


def test_kubernetes_role_is_bound_to_the_tenant_namespace_and_ensure_is_idempotent(
    bao_server: BaoServer, bao: OpenBao
) -> None:
    a = slug("a")
    bao.ensure_tenant(a)
    bao.ensure_tenant(a)
    role = bao_server.root().auth.kubernetes.read_role(f"gpufleet-tenant-{a}", mount_point="kubernetes")
    assert role["bound_service_account_namespaces"] == [f"tenant-{a}"]
    assert role["token_policies"] == [f"gpufleet-tenant-{a}"]
    assert bao.tenant_status(a) == {"policy": True, "role": True, "data": False}


def test_revoke_leaves_nothing_behind_and_can_repeat(bao_server: BaoServer, bao: OpenBao) -> None:
    a, b = slug("a"), slug("b")
    bao.ensure_tenant(a)
    bao.ensure_tenant(b)
    as_a = tenant_token(bao_server, bao, a)
    write(as_a, f"tenants/{a}/one", "1")
    write(as_a, f"tenants/{a}/two", "2")
    write(as_a, f"tenants/{a}/two", "2b")  # two versions: all must go
    write(as_a, f"tenants/{a}/dir/three", "3")
    bao.store_vcluster_admin(a, "kubeconfig")
    write(bao_server.root(), f"tenants/{b}/keep", "b")
    assert bao.tenant_status(a) == {"policy": True, "role": True, "data": True}

    bao.revoke_tenant(a)

    assert bao.tenant_status(a) == {"policy": False, "role": False, "data": False}
    root = bao_server.root()
    for path in (f"tenants/{a}/one", f"tenants/{a}/two", f"tenants/{a}/dir/three",
                 f"platform/tenants/{a}/vcluster-admin"):
        with pytest.raises(hvac_errors.InvalidPath):  # metadata gone too, not only the latest version
            root.secrets.kv.v2.read_secret_metadata(path=path, mount_point="gpufleet")
    # The token issued before the revoke lost every capability with its policy.
    with pytest.raises(hvac_errors.Forbidden):
        write(as_a, f"tenants/{a}/again", "x")
    # Tenant b is untouched.
    assert read(root, f"tenants/{b}/keep") == "b"
    assert bao.tenant_status(b)["policy"] is True
    bao.revoke_tenant(a)  # already gone: fine


def test_unreachable_server_is_transient() -> None:
    bao = OpenBao.connect(f"http://127.0.0.1:{free_port()}", token="x", timeout=2)
    with pytest.raises(TransientError, match="OpenBao"):
        bao.ensure_tenant("acme")


def test_bad_token_is_permanent(bao_server: BaoServer) -> None:
    bao = OpenBao.connect(bao_server.addr, token="not-a-token")
    with pytest.raises(PermanentError, match=r"Forbidden|permission denied"):
        bao.ensure_tenant("acme")


def test_missing_kubernetes_auth_is_a_clear_permanent_error(bao_server: BaoServer) -> None:
    bao = OpenBao.connect(bao_server.addr, token=bao_server.root_token, kubernetes_auth="not-enabled")
    with pytest.raises(PermanentError, match=r"no Kubernetes auth method at auth/not-enabled/"):
        bao.ensure_tenant(slug("a"))


def test_approle_login(bao_server: BaoServer) -> None:
    root = bao_server.root()
    if "approle/" not in root.sys.list_auth_methods()["data"]:
        root.sys.enable_auth_method("approle")
    root.sys.create_or_update_policy(
        name="gpufleet-platform-test",
        policy='path "sys/*" { capabilities = ["create","read","update","delete","list","sudo"] }\n'
               'path "auth/kubernetes/*" { capabilities = ["create","read","update","delete","list"] }\n'
               'path "gpufleet/*" { capabilities = ["create","read","update","delete","list"] }\n',
    )
    root.auth.approle.create_or_update_approle("gpufleet-test", token_policies=["gpufleet-platform-test"])
    role_id = root.auth.approle.read_role_id("gpufleet-test")["data"]["role_id"]
    secret_id = root.auth.approle.generate_secret_id("gpufleet-test")["data"]["secret_id"]
    bao = OpenBao.connect(bao_server.addr, role_id=role_id, secret_id=secret_id)
    a = slug("a")
    bao.ensure_tenant(a)
    assert bao.tenant_status(a)["role"] is True
    with pytest.raises(PermanentError, match="AppRole"):
        OpenBao.connect(bao_server.addr, role_id=role_id, secret_id="wrong")
