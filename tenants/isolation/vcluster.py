"""The tenant's vcluster.yaml additions: OIDC for the virtual API server, RBAC inside the virtual
cluster, and placement of synced pods. Pure; registered as a tenants.render vCluster values hook."""

from __future__ import annotations

from typing import Any

from infra.manifests import Manifest, to_yaml_stream
from infra.openbao import VCLUSTER_CA, TenantSecrets

from ..render import RenderContext, TenantView, metadata
from . import config

# Tenant role -> ClusterRole inside the virtual cluster (Kubernetes' default user-facing roles).
ROLE_BINDINGS = (
    ("owner", "cluster-admin"),
    ("admin", "cluster-admin"),
    ("member", "edit"),
    ("viewer", "view"),
)


def oidc_args(settings: config.IsolationSettings) -> list[str]:
    """kube-apiserver flags: the virtual API server trusts the platform's issuer, so people are themselves."""
    return [
        f"--oidc-issuer-url={settings.oidc_issuer}",
        f"--oidc-client-id={settings.oidc_client_id}",
        f"--oidc-username-claim={settings.oidc_username_claim}",
        f"--oidc-groups-claim={settings.oidc_groups_claim}",
        f"--oidc-username-prefix={settings.oidc_username_prefix}",
        f"--oidc-groups-prefix={settings.oidc_groups_prefix}",
    ]


def rbac_manifests(view: TenantView, settings: config.IsolationSettings) -> list[dict[str, Any]]:
    """ClusterRoleBindings applied inside the virtual cluster (not on the host): OIDC group -> role."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": f"gpufleet:{role}",
                "labels": {"app.kubernetes.io/managed-by": "gpufleet"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    # The API server prepends the groups prefix to every group in the token.
                    "name": settings.oidc_groups_prefix + settings.group(view.slug, role),
                }
            ],
        }
        for role, cluster_role in ROLE_BINDINGS
    ]


# The CA the platform issues (infra/pki.py) reaches the vCluster as its own PKI: External Secrets writes it as
# `ca.crt`/`ca.key` into the Secret vCluster keeps its certificates in, `<release>-certs`
# (loft-sh/vcluster@v0.36.1:pkg/certs/ensure.go:316-318, keys pkg/certs/constants.go:144-175), before the
# control plane first starts. vCluster then downloads that Secret into /data/pki (ensure.go:121-126, 376-400),
# finds the leaf certificates missing (certsExpiringSoon: a missing leaf "needs regeneration", ensure.go:224-236),
# generates them with the CA it found -- the API server's serving certificate included, with the ingress host in
# its SANs -- copies the CA to server-ca/client-ca (splitCACert, ensure.go:415-461) and writes everything back to
# the Secret (ensure.go:143-151). The platform sets no `experimental.virtualClusterKubeConfig`: vCluster only
# generates certificates when its CA path is /data/pki (pkg/setup/initialize.go:58-60), and its API server reads
# /data/pki in any case (pkg/k8s/k8s.go:66-77). (An earlier version pointed serverCACert elsewhere: the control
# plane would never have started -- issue 26 review, F1.)
SERVING_CA_SECRET = "vcluster-certs"  # CertSecretName("vcluster"): our release is named `vcluster`


def serving_ca_manifests(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    """The ExternalSecret that seeds the vCluster's certificate Secret with the platform-issued CA from OpenBao.

    On every placement, not the home only: each placement runs a vCluster of its own (tenants.render), which
    would otherwise generate a CA of its own that no kubeconfig carries. All of one
    tenant's vClusters sign their serving certificates (each with its own host in its SANs) with the tenant's
    one CA, so every context of the tenant's kubeconfig verifies with the CA it carries, and no other tenant's
    kubeconfig verifies any of them."""
    settings = config.of_ctx(ctx)
    if not settings.ca_store:
        return []
    key = f"{TenantSecrets(view.slug).platform_path}/{VCLUSTER_CA}"
    return [{
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": metadata(view, SERVING_CA_SECRET),
        "spec": {
            # Written once: vCluster adds its generated certificates and service-account keys to this Secret,
            # which a periodic refresh would drop (a CA renewal re-creates the ExternalSecret: docs/compatibility.md).
            "refreshInterval": "0s",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": settings.ca_store},
            # Owner: the Secret goes with the ExternalSecret (tenant teardown); the CA stays in OpenBao.
            "target": {"name": SERVING_CA_SECRET, "creationPolicy": "Owner", "deletionPolicy": "Retain"},
            "data": [{"secretKey": secret_key, "remoteRef": {"key": key, "property": stored}}
                     for secret_key, stored in (("ca.crt", "tls.crt"), ("ca.key", "tls.key"))],
        },
    }]


def _child(values: dict[str, Any], *path: str) -> dict[str, Any]:
    node = values
    for key in path:
        node = node.setdefault(key, {})
    return node


CA_SEED_VOLUME = "gpufleet-ca-seed"


def wait_for_the_seeded_ca(values: dict[str, Any]) -> None:
    """The control plane does not start before External Secrets wrote the platform's CA (review N4).

    The ExternalSecret and the vCluster's HelmRelease are applied in one stage, and nothing else orders them. A
    control plane that started first would find no `vcluster-certs`, generate a CA of its own and sign its
    serving certificate with it (loft-sh/vcluster@v0.36.1:pkg/certs/ensure.go:155-219); External Secrets then
    replaces only `ca.crt`/`ca.key` (external-secrets@v2.9.0 externalsecret_controller.go:461-498) and the
    leaf certificates stay signed by the other CA for good (ensure.go:122-129 keeps unexpired ones): every
    kubeconfig would fail TLS verification. A required (non-optional) Secret volume makes the kubelet hold the
    pod in ContainerCreating until the Secret exists, and vCluster itself is the only other writer of that
    Secret, so the first start always finds the platform's CA. The mount is read-only and outside /data/pki;
    vCluster never reads it."""
    persistence = _child(values, "controlPlane", "statefulSet", "persistence")
    persistence["addVolumes"] = [*persistence.get("addVolumes", []), {
        "name": CA_SEED_VOLUME,
        "secret": {"secretName": SERVING_CA_SECRET, "optional": False, "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    }]
    persistence["addVolumeMounts"] = [*persistence.get("addVolumeMounts", []), {
        "name": CA_SEED_VOLUME, "mountPath": "/var/run/gpufleet/ca-seed", "readOnly": True,
    }]


def extend_values(view: TenantView, ctx: RenderContext, values: dict[str, Any]) -> None:
    settings = config.of_ctx(ctx)
    iso = config.of_view(view)
    if settings.oidc_issuer:  # never a made-up issuer: without one, people cannot sign in at all
        api_server = _child(values, "controlPlane", "distro", "k8s", "apiServer")
        api_server["extraArgs"] = [*api_server.get("extraArgs", []), *oidc_args(settings)]
    # This placement's own API name: the home's, or `<slug>-<cluster>` on another placement (config.server_url).
    host = settings.server_host(view.slug, "" if view.home else view.cluster)
    if host:
        # The kubeconfig's server name must route to this vCluster and be in its serving certificate:
        # the chart's Ingress (ingress-nginx with SSL passthrough, so the vCluster terminates TLS itself)
        # and the proxy certificate's extra SANs (chart values.schema.json ControlPlaneIngress /
        # ControlPlaneProxy.extraSANs, v0.36.1).
        _child(values, "controlPlane")["ingress"] = {"enabled": True, "host": host}
        proxy = _child(values, "controlPlane", "proxy")
        proxy["extraSANs"] = sorted({*proxy.get("extraSANs", []), host})
    if settings.ca_store:
        wait_for_the_seeded_ca(values)
    _child(values, "experimental", "deploy", "vcluster")["manifests"] = to_yaml_stream(
        rbac_manifests(view, settings)
    )
    if iso.placement.tolerations:
        pods = _child(values, "sync", "toHost", "pods")
        pods["enforceTolerations"] = iso.placement.enforce_tolerations
        # Syncing the (dedicated) nodes with a label selector also sets that nodeSelector on every
        # synced pod (vCluster SyncNodeSelector.labels), so the tenant's pods cannot land elsewhere.
        _child(values, "sync", "fromHost")["nodes"] = {
            "enabled": True,
            "selector": {"all": False, "labels": dict(iso.placement.node_selector)},
        }
