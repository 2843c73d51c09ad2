"""The reconcile's OpenBao step: settings in, a `Secrets` condition out.

Thin edge over `infra.openbao`: builds the client from settings and turns the outcome into a
Kubernetes-style condition. Not configured (no GPUFLEET_OPENBAO_ADDR) is a normal state for the
demo and for GitOps-only installs: the step is skipped and the condition says so.
"""

from __future__ import annotations

from typing import Any

from gpufleet import clock
from gpufleet.core import conf
from infra import pki
from infra.backend import ReadsSecrets
from infra.openbao import OpenBao

CONDITION = "Secrets"


def configured() -> bool:
    return bool(conf.OPENBAO_ADDR)


def client() -> OpenBao:
    return OpenBao.connect(
        conf.OPENBAO_ADDR,
        token=conf.OPENBAO_TOKEN,
        role_id=conf.OPENBAO_ROLE_ID,
        secret_id=conf.OPENBAO_SECRET_ID,
        approle_path=conf.OPENBAO_APPROLE_PATH,
        mount=conf.OPENBAO_MOUNT,
        kubernetes_auth=conf.OPENBAO_KUBERNETES_AUTH,
    )


# vCluster's chart writes the admin kubeconfig of the virtual cluster to Secret `vc-<release>`
# (key `config`) in the host namespace; our release is named `vcluster`.
VCLUSTER_KUBECONFIG_SECRET = "vc-vcluster"


def ensure(slug: str, backend: Any = None) -> tuple[str, str, str]:
    """(status, reason, message) for the `Secrets` condition. Raises Transient/PermanentError."""
    if not configured():
        return "False", "NotConfigured", "OpenBao is not configured (GPUFLEET_OPENBAO_ADDR); secrets step skipped"
    bao = client()
    names = bao.ensure_tenant(slug)
    message = (
        f"KV v2 {names.mount}/{names.path}/, policy {names.policy}, Kubernetes-auth role {names.role} "
        f"bound to namespace {names.namespace}"
    )
    return "True", "Provisioned", message + ensure_vcluster_ca(bao, slug) + capture_vcluster_admin(bao, slug, backend)


def ensure_vcluster_ca(bao: OpenBao, slug: str) -> str:
    """Issue the vCluster's serving CA (infra/pki.py) once, and again before it expires. Idempotent: a CA that
    is still good is left alone, so the kubeconfigs people already hold keep verifying."""
    if not ca_enabled():
        return ""
    found = bao.read_vcluster_ca(slug)
    if found and found.get("tls.key") and not pki.needs_renewal(found.get("tls.crt", ""), clock.now()):
        return "; vCluster serving CA in OpenBao"
    cert, key = pki.new_ca(f"gpufleet vCluster {slug}", clock.now())
    bao.store_vcluster_ca(slug, cert, key)
    return "; vCluster serving CA issued into OpenBao" + (" (renewed: restart the vCluster)" if found else "")


def ca_enabled() -> bool:
    """The platform issues each vCluster's serving CA (GPUFLEET_VCLUSTER_CA_STORE names the ClusterSecretStore
    External Secrets reads it through; empty turns it off)."""
    return bool(conf.VCLUSTER_CA_STORE)


def vcluster_ca_cert(tenant: Any) -> str | None:
    """The kubeconfig's CA (the registry's `kubeconfig_ca`): the CA the platform issued, from OpenBao."""
    if not (configured() and ca_enabled()):
        return None
    found = client().read_vcluster_ca(tenant.slug)
    return (found or {}).get("tls.crt") or None


def capture_vcluster_admin(bao: OpenBao, slug: str, backend: Any) -> str:
    """Move the vCluster admin kubeconfig from the cluster into OpenBao (backends that can read it).

    The GitOps backend has no cluster access; there an operator's ExternalSecret/PushSecret does it.
    """
    if not isinstance(backend, ReadsSecrets):
        return ""
    data = backend.read_secret(f"tenant-{slug}", VCLUSTER_KUBECONFIG_SECRET)
    if not data or not data.get("config"):
        return "; vCluster admin kubeconfig not created yet"
    if bao.read_vcluster_admin(slug) != data["config"]:
        bao.store_vcluster_admin(slug, data["config"])
    return "; vCluster admin kubeconfig kept in OpenBao"


def revoke(slug: str) -> tuple[str, str, str]:
    if not configured():
        return "False", "NotConfigured", "OpenBao is not configured; nothing to revoke"
    client().revoke_tenant(slug)
    return "False", "Revoked", "policy, role and all secrets deleted"


def store_vcluster_admin(slug: str, kubeconfig: str) -> None:
    """The platform's credential for a tenant's vCluster lives in OpenBao, never in the database."""
    client().store_vcluster_admin(slug, kubeconfig)


def read_vcluster_admin(slug: str) -> str | None:
    return client().read_vcluster_admin(slug)


def condition_fields(result: tuple[str, str, str]) -> dict[str, Any]:
    status, reason, message = result
    return {"type": CONDITION, "status": status, "reason": reason, "message": message}
