"""Cilium network isolation: per-tenant CiliumNetworkPolicies and the platform's clusterwide baseline.

Model: every tenant pod is default-deny in both directions; allowed are its own namespace, DNS to
kube-dns, the vCluster API from the ingress path, the host API server for the vCluster syncer, and
(by trust level, or by admin exception) the outside world. Other tenants are denied explicitly, so
no later allow rule can open a path between tenants (Cilium deny rules win over allow rules).
"""

from __future__ import annotations

from typing import Any

from infra.manifests import Manifest

from ..render import RenderContext, TenantView, metadata, platform_metadata
from . import config, egress

NAMESPACE_KEY = "k8s:io.kubernetes.pod.namespace"
TENANT_NS_LABEL = "k8s:io.cilium.k8s.namespace.labels.gpufleet.io/tenant"
# Labels the vCluster chart puts on its control-plane pods.
VCLUSTER_POD = {"app": "vcluster", "release": "vcluster"}
VCLUSTER_API_PORT = "8443"
# vCluster's syncer stamps every host pod it creates with this label and restores it if a tenant
# forges it; the control plane's own pods (the chart's StatefulSet) never carry it. Selecting on its
# absence keeps a tenant pod that copies `app: vcluster` out of the control plane's egress rules.
SYNCED_MARKER = "vcluster.loft.sh/managed-by"
CONTROL_PLANE = {"matchLabels": dict(VCLUSTER_POD),
                 "matchExpressions": [{"key": SYNCED_MARKER, "operator": "DoesNotExist"}]}
KUBE_DNS = {NAMESPACE_KEY: "kube-system", "k8s:k8s-app": "kube-dns"}


def _cnp(view: TenantView, name: str, spec: dict[str, Any]) -> Manifest:
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": metadata(view, name),
            "spec": spec}


def isolation(view: TenantView) -> Manifest:
    return _cnp(view, "gpufleet-tenant-isolation", {
        "description": "default deny; traffic inside the tenant namespace; nothing from other tenants",
        "endpointSelector": {},
        "enableDefaultDeny": {"ingress": True, "egress": True},
        # An empty selector in a namespaced policy means "endpoints of this namespace".
        "ingress": [{"fromEndpoints": [{}]}],
        "egress": [{"toEndpoints": [{}]}],
        "ingressDeny": [{"fromEndpoints": [{"matchExpressions": [
            {"key": NAMESPACE_KEY, "operator": "NotIn", "values": [view.namespace]},
            {"key": TENANT_NS_LABEL, "operator": "Exists"},
        ]}]}],
    })


def dns(view: TenantView) -> Manifest:
    return _cnp(view, "gpufleet-dns", {
        "description": "DNS to kube-dns only, through Cilium's DNS proxy (needed for FQDN egress rules)",
        "endpointSelector": {},
        "egress": [{
            "toEndpoints": [{"matchLabels": dict(KUBE_DNS)}],
            "toPorts": [{
                "ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
                "rules": {"dns": [{"matchPattern": "*"}]},
            }],
        }],
    })


def vcluster_api(view: TenantView, settings: config.IsolationSettings) -> Manifest:
    source = {NAMESPACE_KEY: settings.ingress_namespace, **dict(settings.ingress_labels)}
    return _cnp(view, "gpufleet-vcluster-api", {
        "description": "the virtual cluster's API server, reachable from the ingress path only",
        "endpointSelector": {"matchLabels": dict(VCLUSTER_POD)},
        "ingress": [{
            "fromEndpoints": [{"matchLabels": source}],
            "toPorts": [{"ports": [{"port": VCLUSTER_API_PORT, "protocol": "TCP"}]}],
        }],
    })


def kube_apiserver(view: TenantView) -> Manifest:
    # Only the vCluster syncer talks to the host API server; tenant workloads talk to the virtual one.
    return _cnp(view, "gpufleet-kube-apiserver", {
        "description": "the vCluster syncer reaches the host API server",
        "endpointSelector": CONTROL_PLANE,
        "egress": [{"toEntities": ["kube-apiserver"]}],
    })


def oidc_issuer(view: TenantView, settings: config.IsolationSettings) -> list[Manifest]:
    """The virtual API server fetches the issuer's discovery document and signing keys (kube-apiserver
    --oidc-issuer-url); without this an untrusted tenant's control plane, which has no world egress,
    rejects every sign-in. Only the control plane, only the issuer's name and port: tenant workloads
    keep no internet egress. Name resolution goes through Cilium's DNS proxy (the gpufleet-dns rule)."""
    issuer = settings.oidc_issuer_host_port
    if issuer is None:
        return []
    host, port = issuer
    return [_cnp(view, "gpufleet-oidc-issuer", {
        "description": "the vCluster control plane reaches the platform's OIDC issuer",
        "endpointSelector": CONTROL_PLANE,
        "egress": [{
            "toFQDNs": [{"matchName": host}],
            "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}],
        }],
    })]


def monitoring(view: TenantView, settings: config.IsolationSettings) -> Manifest:
    # vLLM's queue depth / KV-cache metrics drive KEDA; the platform's scraper must reach them.
    return _cnp(view, "gpufleet-monitoring", {
        "description": "the platform's metrics scraper may scrape tenant pods",
        "endpointSelector": {},
        "ingress": [{"fromEndpoints": [{"matchLabels": {NAMESPACE_KEY: settings.monitoring_namespace}}]}],
    })


def world_egress(view: TenantView, iso: config.TenantIsolationView) -> list[Manifest]:
    if iso.world_egress:
        rules: list[dict[str, Any]] = [{"toEntities": ["world"]}]
    else:
        rules = []
        if iso.egress_cidrs:
            rules.append({"toCIDRSet": [{"cidr": cidr} for cidr in sorted(iso.egress_cidrs)]})
        if iso.egress_fqdns:
            rules.append({"toFQDNs": [
                {"matchPattern": name} if egress.is_pattern(name) else {"matchName": name}
                for name in sorted(iso.egress_fqdns)
            ]})
    if not rules:
        return []  # untrusted without exceptions: nothing leaves the cluster
    return [_cnp(view, "gpufleet-egress", {
        "description": "egress outside the cluster: " + ("the internet" if iso.world_egress
                                                          else "admin-approved CIDRs/FQDNs only"),
        "endpointSelector": {},
        "egress": rules,
    })]


def render_network(view: TenantView, ctx: RenderContext) -> list[Manifest]:
    settings, iso = config.of_ctx(ctx), config.of_view(view)
    return [isolation(view), dns(view), vcluster_api(view, settings), kube_apiserver(view),
            *oidc_issuer(view, settings), monitoring(view, settings), *world_egress(view, iso)]


def render_baseline(ctx: RenderContext) -> list[Manifest]:
    settings = config.of_ctx(ctx)
    return [{
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": platform_metadata("gpufleet-tenant-baseline"),
        "spec": {
            "description": "every tenant pod: no cloud instance-metadata endpoint (node credentials)",
            "endpointSelector": {"matchExpressions": [{"key": TENANT_NS_LABEL, "operator": "Exists"}]},
            # A deny-only baseline must not flip endpoints into default-deny by itself.
            "enableDefaultDeny": {"ingress": False, "egress": False},
            "egressDeny": [{"toCIDR": list(settings.metadata_cidrs)}],
        },
    }]
