"""Tenant secrets in OpenBao (or Vault: same API) through hvac. No Django here.

Per tenant:
- a KV v2 path `<mount>/tenants/<slug>/` the tenant's workloads may read and write;
- an ACL policy `gpufleet-tenant-<slug>` that reaches that path and nothing else;
- a Kubernetes-auth role `gpufleet-tenant-<slug>` bound to the service accounts of the tenant's
  host namespace, carrying that policy (External Secrets logs in with it).

Credentials the platform itself needs (the vCluster admin kubeconfig) are stored under
`<mount>/platform/tenants/<slug>/`, outside the tenant's policy: a tenant never reads the
platform's credential for its own control plane, and the database never holds it.

Everything is idempotent (ensure twice = once; revoke what is already gone = fine). hvac's
errors are sorted into TransientError (sealed, 5xx, throttled, unreachable) and PermanentError.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import hvac
import requests
from hvac import exceptions as hvac_errors

from .errors import PermanentError, TransientError

DEFAULT_MOUNT = "gpufleet"
DEFAULT_KUBERNETES_AUTH = "kubernetes"
VCLUSTER_ADMIN = "vcluster-admin"
# The vCluster's serving CA (infra/pki.py), below the platform path: never in the tenant's own policy.
VCLUSTER_CA = "vcluster-ca"

_TRANSIENT = (
    hvac_errors.InternalServerError,
    hvac_errors.VaultDown,
    hvac_errors.BadGateway,
    hvac_errors.RateLimitExceeded,
    hvac_errors.VaultNotInitialized,
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
)


@contextmanager
def _mapped(what: str) -> Iterator[None]:
    try:
        yield
    except _TRANSIENT as exc:
        raise TransientError(f"OpenBao: {what}: {type(exc).__name__}: {exc}") from exc
    except (hvac_errors.VaultError, requests.exceptions.RequestException) as exc:
        raise PermanentError(f"OpenBao: {what}: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class TenantSecrets:
    """Names of one tenant's things in OpenBao (pure: computed from the slug)."""

    slug: str
    mount: str = DEFAULT_MOUNT
    kubernetes_auth: str = DEFAULT_KUBERNETES_AUTH

    @property
    def path(self) -> str:
        """KV path (below the mount) the tenant owns."""
        return f"tenants/{self.slug}"

    @property
    def platform_path(self) -> str:
        """KV path for the platform's own credentials about this tenant (not in the tenant's policy)."""
        return f"platform/tenants/{self.slug}"

    @property
    def policy(self) -> str:
        return f"gpufleet-tenant-{self.slug}"

    @property
    def role(self) -> str:
        return f"gpufleet-tenant-{self.slug}"

    @property
    def namespace(self) -> str:
        return f"tenant-{self.slug}"

    def policy_hcl(self) -> str:
        # KV v2 splits one logical path into data/, metadata/, delete/, undelete/, destroy/.
        # The trailing `/*` keeps a sibling like tenants/<slug>-other out of reach.
        base = f"{self.mount}"
        lines = [f"# gpufleet: tenant {self.slug} may use its own KV v2 path and nothing else"]
        for sub, caps in (
            ("data", '["create", "read", "update", "delete"]'),
            ("metadata", '["read", "list", "delete"]'),
            ("delete", '["update"]'),
            ("undelete", '["update"]'),
            ("destroy", '["update"]'),
        ):
            lines.append(f'path "{base}/{sub}/{self.path}/*" {{\n  capabilities = {caps}\n}}')
        lines.append(f'path "{base}/metadata/{self.path}" {{\n  capabilities = ["list"]\n}}')
        return "\n".join(lines) + "\n"


class OpenBao:
    def __init__(
        self,
        client: hvac.Client,
        *,
        mount: str = DEFAULT_MOUNT,
        kubernetes_auth: str = DEFAULT_KUBERNETES_AUTH,
        login_ttl: str = "1h",
    ) -> None:
        self.client = client
        self.mount = mount
        self.kubernetes_auth = kubernetes_auth
        self.login_ttl = login_ttl

    @classmethod
    def connect(
        cls,
        addr: str,
        *,
        token: str = "",
        role_id: str = "",
        secret_id: str = "",
        approle_path: str = "approle",
        timeout: float = 10.0,
        **kwargs: Any,
    ) -> OpenBao:
        """A token from the environment, or an AppRole login (role_id + secret_id)."""
        client = hvac.Client(url=addr, token=token or None, timeout=timeout)
        if not token:
            if not (role_id and secret_id):
                raise PermanentError("OpenBao: set a token or an AppRole role_id and secret_id")
            with _mapped("AppRole login"):
                client.auth.approle.login(role_id=role_id, secret_id=secret_id, mount_point=approle_path)
        return cls(client, **kwargs)

    def names(self, slug: str) -> TenantSecrets:
        return TenantSecrets(slug, self.mount, self.kubernetes_auth)

    # --- platform setup -------------------------------------------------------------------------

    def ensure_mount(self) -> None:
        with _mapped("list secrets engines"):
            mounts = self.client.sys.list_mounted_secrets_engines()
        mounts = mounts.get("data", mounts)
        existing = mounts.get(f"{self.mount}/")
        if existing is None:
            with _mapped(f"enable KV v2 at {self.mount}/"):
                self.client.sys.enable_secrets_engine("kv", path=self.mount, options={"version": "2"})
        elif existing.get("type") != "kv" or (existing.get("options") or {}).get("version") != "2":
            raise PermanentError(f"OpenBao: {self.mount}/ is mounted but is not a KV version 2 engine")

    def _require_kubernetes_auth(self) -> None:
        with _mapped("list auth methods"):
            methods = self.client.sys.list_auth_methods()
        methods = methods.get("data", methods)
        if f"{self.kubernetes_auth}/" not in methods:
            # Configuring it needs the cluster's API address and CA: an operator's job, done once.
            raise PermanentError(
                f"OpenBao: no Kubernetes auth method at auth/{self.kubernetes_auth}/ "
                "(enable and configure it for the host cluster)"
            )

    # --- per tenant -----------------------------------------------------------------------------

    def ensure_tenant(self, slug: str) -> TenantSecrets:
        """Create or repair the tenant's policy and Kubernetes-auth role (the KV path needs no object)."""
        names = self.names(slug)
        self.ensure_mount()
        self._require_kubernetes_auth()
        with _mapped(f"write policy {names.policy}"):
            self.client.sys.create_or_update_policy(name=names.policy, policy=names.policy_hcl())
        with _mapped(f"write role {names.role}"):
            self.client.auth.kubernetes.create_role(
                name=names.role,
                bound_service_account_names=["*"],
                bound_service_account_namespaces=[names.namespace],
                policies=[names.policy],
                ttl=self.login_ttl,
                mount_point=self.kubernetes_auth,
            )
        return names

    def tenant_status(self, slug: str) -> dict[str, bool]:
        """What exists for the tenant (for tests and the teardown's "nothing left" check)."""
        names = self.names(slug)
        with _mapped("read tenant state"):
            policies = self.client.sys.list_acl_policies().get("data", {}).get("keys", [])
            try:
                self.client.auth.kubernetes.read_role(names.role, mount_point=self.kubernetes_auth)
                role = True
            except hvac_errors.InvalidPath:
                role = False
        return {
            "policy": names.policy in policies,
            "role": role,
            "data": bool(self._keys(names.path)) or bool(self._keys(names.platform_path)),
        }

    def revoke_tenant(self, slug: str) -> None:
        """Delete the role, the policy and every secret (all versions and metadata). Safe to repeat."""
        names = self.names(slug)
        with _mapped(f"delete role {names.role}"):
            try:
                self.client.auth.kubernetes.delete_role(names.role, mount_point=self.kubernetes_auth)
            except hvac_errors.InvalidPath:
                pass
        # Deleting the policy also disarms tokens already issued under it: they keep no capability.
        with _mapped(f"delete policy {names.policy}"):
            self.client.sys.delete_policy(names.policy)
        for prefix in (names.path, names.platform_path):
            for key in self._keys(prefix):
                with _mapped(f"delete {prefix}/{key}"):
                    self.client.secrets.kv.v2.delete_metadata_and_all_versions(
                        path=f"{prefix}/{key}", mount_point=self.mount
                    )

    def _keys(self, prefix: str) -> list[str]:
        """Every secret below prefix, recursively (KV lists one level at a time)."""
        found: list[str] = []
        with _mapped(f"list {prefix}"):
            try:
                listed = self.client.secrets.kv.v2.list_secrets(path=prefix, mount_point=self.mount)
            except hvac_errors.InvalidPath:
                return []
        for key in listed.get("data", {}).get("keys", []):
            if key.endswith("/"):
                found.extend(f"{key}{sub}" for sub in self._keys(f"{prefix}/{key.rstrip('/')}"))
            else:
                found.append(key)
        return sorted(found)

    # --- the platform's credential for a tenant's vCluster --------------------------------------

    def store_vcluster_admin(self, slug: str, kubeconfig: str) -> None:
        names = self.names(slug)
        with _mapped(f"write {names.platform_path}/{VCLUSTER_ADMIN}"):
            self.client.secrets.kv.v2.create_or_update_secret(
                path=f"{names.platform_path}/{VCLUSTER_ADMIN}",
                secret={"kubeconfig": kubeconfig},
                mount_point=self.mount,
            )

    def store_vcluster_ca(self, slug: str, cert_pem: str, key_pem: str) -> None:
        """The vCluster's serving CA, read by External Secrets into the tenant namespace (VCLUSTER_CA)."""
        names = self.names(slug)
        with _mapped(f"write {names.platform_path}/{VCLUSTER_CA}"):
            self.client.secrets.kv.v2.create_or_update_secret(
                path=f"{names.platform_path}/{VCLUSTER_CA}", secret={"tls.crt": cert_pem, "tls.key": key_pem},
                mount_point=self.mount,
            )

    def read_vcluster_ca(self, slug: str) -> dict[str, str] | None:
        names = self.names(slug)
        with _mapped(f"read {names.platform_path}/{VCLUSTER_CA}"):
            try:
                got = self.client.secrets.kv.v2.read_secret_version(
                    path=f"{names.platform_path}/{VCLUSTER_CA}", mount_point=self.mount,
                    raise_on_deleted_version=True,
                )
            except hvac_errors.InvalidPath:
                return None
        return {str(k): str(v) for k, v in got["data"]["data"].items()}

    def read_vcluster_admin(self, slug: str) -> str | None:
        names = self.names(slug)
        with _mapped(f"read {names.platform_path}/{VCLUSTER_ADMIN}"):
            try:
                got = self.client.secrets.kv.v2.read_secret_version(
                    path=f"{names.platform_path}/{VCLUSTER_ADMIN}",
                    mount_point=self.mount,
                    raise_on_deleted_version=True,
                )
            except hvac_errors.InvalidPath:
                return None
        return str(got["data"]["data"]["kubeconfig"])
