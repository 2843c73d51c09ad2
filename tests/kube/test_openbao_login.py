"""A real Kubernetes-auth login at OpenBao with the tenant's role, the cluster's TokenReview served by kmock.

OpenBao validates a service-account token by calling the cluster's TokenReview API. kmock answers
that call here (as the API server would for a valid token), so the login path is OpenBao's own code:
the role's namespace binding is enforced by OpenBao, not by us.
"""

from __future__ import annotations

import uuid

import hvac
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hvac import exceptions as hvac_errors

from infra.openbao import OpenBao
from tests.secrets.conftest import BaoServer, throwaway_ca_pem

from .emulator import EmulatorThread

_KEY = ec.generate_private_key(ec.SECP256R1())


def service_account_token(namespace: str, name: str = "external-secrets") -> str:
    """A legacy-format service-account JWT (what a pod mounts); TokenReview below vouches for it."""
    claims = {
        "iss": "kubernetes/serviceaccount",
        "sub": f"system:serviceaccount:{namespace}:{name}",
        "kubernetes.io/serviceaccount/namespace": namespace,
        "kubernetes.io/serviceaccount/service-account.name": name,
        "kubernetes.io/serviceaccount/service-account.uid": f"uid-{namespace}-{name}",
    }
    return jwt.encode(claims, _KEY, algorithm="ES256")


def token_review(request) -> dict:  # the API server's answer for a valid token
    token = request.data["spec"]["token"]
    claims = jwt.decode(token, options={"verify_signature": False})
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "status": {
            "authenticated": True,
            "user": {
                "username": claims["sub"],
                "uid": claims["kubernetes.io/serviceaccount/service-account.uid"],
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{claims['sub'].split(':')[2]}"],
            },
        },
    }


@pytest.fixture
def kube_auth(bao_server: BaoServer, kube: EmulatorThread) -> str:
    """A Kubernetes auth mount whose "cluster" is the emulator (OpenBao calls its TokenReview API)."""
    mount = f"k8s-{uuid.uuid4().hex[:6]}"
    kube.call(lambda: kube.emulator["post /apis/authentication.k8s.io/v1/tokenreviews"] << token_review)
    root = bao_server.root()
    root.sys.enable_auth_method("kubernetes", path=mount)
    root.auth.kubernetes.configure(
        kubernetes_host=kube.url, kubernetes_ca_cert=throwaway_ca_pem(), disable_local_ca_jwt=True, mount_point=mount
    )
    return mount


def login(bao_server: BaoServer, mount: str, role: str, namespace: str) -> hvac.Client:
    client = hvac.Client(url=bao_server.addr, timeout=10)
    client.auth.kubernetes.login(role, service_account_token(namespace), mount_point=mount)
    return client


def test_service_account_of_the_tenant_namespace_logs_in_and_reaches_only_its_path(
    bao_server: BaoServer, kube_auth: str, kube: EmulatorThread
) -> None:
    bao = OpenBao.connect(bao_server.addr, token=bao_server.root_token, kubernetes_auth=kube_auth)
    a, b = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    bao.ensure_tenant(a)
    bao.ensure_tenant(b)

    as_a = login(bao_server, kube_auth, f"gpufleet-tenant-{a}", f"tenant-{a}")
    reviews = [r for r in kube.emulator._requests if r.url.path.endswith("/tokenreviews")]
    assert reviews, "OpenBao must have asked the cluster to review the token"
    assert as_a.lookup_token()["data"]["policies"] == ["default", f"gpufleet-tenant-{a}"]
    as_a.secrets.kv.v2.create_or_update_secret(path=f"tenants/{a}/db", secret={"pw": "x"}, mount_point="gpufleet")
    with pytest.raises(hvac_errors.Forbidden):
        as_a.secrets.kv.v2.read_secret_version(path=f"tenants/{b}/db", mount_point="gpufleet",
                                               raise_on_deleted_version=True)

    # A service account of tenant b's namespace cannot use tenant a's role.
    with pytest.raises(hvac_errors.VaultError, match="not authorized"):
        login(bao_server, kube_auth, f"gpufleet-tenant-{a}", f"tenant-{b}")

    # After deprovisioning the role is gone: no login at all.
    bao.revoke_tenant(a)
    with pytest.raises(hvac_errors.VaultError):
        login(bao_server, kube_auth, f"gpufleet-tenant-{a}", f"tenant-{a}")
