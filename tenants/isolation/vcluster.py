"""The tenant's vcluster.yaml additions: OIDC for the virtual API server, RBAC inside the virtual
cluster, and placement of synced pods. Pure; registered as a tenants.render vCluster values hook."""

from __future__ import annotations

from typing import Any

from infra.manifests import to_yaml_stream

from ..render import RenderContext, TenantView
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


def _child(values: dict[str, Any], *path: str) -> dict[str, Any]:
    node = values
    for key in path:
        node = node.setdefault(key, {})
    return node


def extend_values(view: TenantView, ctx: RenderContext, values: dict[str, Any]) -> None:
    settings = config.of_ctx(ctx)
    iso = config.of_view(view)
    if settings.oidc_issuer:  # never a made-up issuer: without one, people cannot sign in at all
        api_server = _child(values, "controlPlane", "distro", "k8s", "apiServer")
        api_server["extraArgs"] = [*api_server.get("extraArgs", []), *oidc_args(settings)]
    # This placement's own API name: the home's, or `<slug>-<cluster>` on another placement (config.server_url).
    host = settings.server_host(view.slug, "" if view.extra.get("home", True) else view.extra.get("cluster", ""))
    if host:
        # The kubeconfig's server name must route to this vCluster and be in its serving certificate:
        # the chart's Ingress (ingress-nginx with SSL passthrough, so the vCluster terminates TLS itself)
        # and the proxy certificate's extra SANs (chart values.schema.json ControlPlaneIngress /
        # ControlPlaneProxy.extraSANs, v0.36.1).
        _child(values, "controlPlane")["ingress"] = {"enabled": True, "host": host}
        proxy = _child(values, "controlPlane", "proxy")
        proxy["extraSANs"] = sorted({*proxy.get("extraSANs", []), host})
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
