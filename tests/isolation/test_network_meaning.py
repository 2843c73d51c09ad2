"""What the rendered Cilium policies MEAN: who may talk to whom (tests/isolation/cilium_eval.py).

Three tenants (untrusted, standard, trusted) plus the platform's clusterwide baseline, evaluated as one
cluster. Each assertion is a flow, not a field, so rewriting a policy into something that reads similar
but means otherwise fails here: the cross-tenant deny's `Exists` turned into `DoesNotExist`, the metadata
CIDRs replaced, the own-namespace egress widened to `toEntities: [cluster]`.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenants.isolation import network
from tenants.isolation.config import TenantIsolationView

from .cilium_eval import Entity, Fqdn, Ip, Pod, allowed, egress_allowed
from .helpers import ctx, rendered

LEVELS = ("untrusted", "standard", "trusted")
METADATA = ("169.254.169.254", "fd00:ec2::254")
OUTSIDE = "203.0.113.7"  # TEST-NET-3: somewhere on the internet


def _namespace_labels(objects: list[dict[str, Any]], namespace: str) -> dict[str, str]:
    for o in objects:
        if o["kind"] == "Namespace" and o["metadata"]["name"] == namespace:
            return dict(o["metadata"].get("labels") or {})
    raise AssertionError(f"namespace {namespace} not rendered")


class Cluster:
    """The rendered policies of several tenants and the baseline, and pods placed in their namespaces."""

    def __init__(self, **extra_by_level: Any) -> None:
        self.objects: list[dict[str, Any]] = [*network.render_baseline(ctx())]
        for level in LEVELS:
            self.objects += rendered(level, **extra_by_level.get(level, {}))

    def pod(self, level: str, **labels: str) -> Pod:
        namespace = f"tenant-t-{level}"
        return Pod(namespace, labels or {"app": "work"}, _namespace_labels(self.objects, namespace))

    def vcluster(self, level: str) -> Pod:
        return self.pod(level, **network.VCLUSTER_POD)


KUBE_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
INGRESS = Pod("ingress-nginx", {"app.kubernetes.io/name": "ingress-nginx"})
SCRAPER = Pod("monitoring", {"app": "vmagent"})
PLATFORM_DB = Pod("gpufleet", {"app": "postgres"})  # a platform namespace without any policy of its own


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return Cluster()


@pytest.mark.parametrize("level", LEVELS)
def test_inside_a_tenant_everything_talks(cluster: Cluster, level: str) -> None:
    assert allowed(cluster.objects, cluster.pod(level, app="a"), cluster.pod(level, app="b"), port=8080)


@pytest.mark.parametrize("src", LEVELS)
@pytest.mark.parametrize("dst", LEVELS)
def test_tenants_cannot_reach_each_other(cluster: Cluster, src: str, dst: str) -> None:
    if src == dst:
        return
    source, target = cluster.pod(src), cluster.pod(dst)
    assert not allowed(cluster.objects, source, target, port=8080)
    assert not allowed(cluster.objects, source, cluster.vcluster(dst), port=8443)
    # Already the source's own egress refuses it (not only the destination's ingress).
    assert not egress_allowed(cluster.objects, source, target, port=8080)


def test_cross_tenant_deny_beats_any_later_allow(cluster: Cluster) -> None:
    """The explicit deny is what keeps tenants apart when someone adds a broad allow rule later."""
    victim = cluster.pod("trusted")
    broad = {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
             "metadata": {"name": "allow-everyone", "namespace": victim.namespace},
             "spec": {"endpointSelector": {}, "ingress": [
                 {"fromEntities": ["cluster"]},
                 {"fromEndpoints": [{"matchExpressions": [{"key": "k8s:io.kubernetes.pod.namespace",
                                                            "operator": "Exists"}]}]}]}}
    objects = [*cluster.objects, broad]
    for level in ("untrusted", "standard"):
        attacker = cluster.pod(level)
        assert not allowed(objects, attacker, victim, port=8080), level
    # ...while non-tenant namespaces the broad rule admits do get in (the deny is about tenants only).
    assert allowed(objects, PLATFORM_DB, victim, port=8080)


@pytest.mark.parametrize("level", LEVELS)
def test_platform_paths_into_a_tenant(cluster: Cluster, level: str) -> None:
    # The metrics scraper reaches tenant pods (KEDA and billing read what it scrapes).
    assert allowed(cluster.objects, SCRAPER, cluster.pod(level), port=8000)
    # The ingress path reaches the virtual cluster's API server, on its port only.
    assert allowed(cluster.objects, INGRESS, cluster.vcluster(level), port=8443)
    assert not allowed(cluster.objects, INGRESS, cluster.vcluster(level), port=22)
    assert not allowed(cluster.objects, INGRESS, cluster.pod(level), port=8443)
    # Nobody else from outside the tenant.
    assert not allowed(cluster.objects, PLATFORM_DB, cluster.pod(level), port=8080)


@pytest.mark.parametrize("level", LEVELS)
def test_egress_stays_inside_the_tenant_namespace(cluster: Cluster, level: str) -> None:
    pod = cluster.pod(level)
    assert allowed(cluster.objects, pod, KUBE_DNS, port=53, protocol="UDP")
    assert not allowed(cluster.objects, pod, KUBE_DNS, port=443)
    assert not allowed(cluster.objects, pod, Pod("kube-system", {"k8s-app": "metrics-server"}), port=443)
    assert not allowed(cluster.objects, pod, PLATFORM_DB, port=5432)
    assert not allowed(cluster.objects, pod, SCRAPER, port=8428)
    # Tenant workloads talk to their virtual cluster, never to the host's API server or the node.
    assert not allowed(cluster.objects, pod, Entity("kube-apiserver"), port=443)
    assert not allowed(cluster.objects, pod, Entity("host"), port=10250)
    assert allowed(cluster.objects, cluster.vcluster(level), Entity("kube-apiserver"), port=443)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("address", METADATA)
def test_no_tenant_reaches_the_instance_metadata_endpoint(cluster: Cluster, level: str, address: str) -> None:
    assert not allowed(cluster.objects, cluster.pod(level), Ip(address), port=80)
    assert not allowed(cluster.objects, cluster.vcluster(level), Ip(address), port=80)


def test_metadata_stays_denied_even_with_an_admin_exception_for_its_network() -> None:
    iso = TenantIsolationView(allowed_modes=frozenset({"whole"}), world_egress=False,
                              egress_cidrs=("169.254.0.0/16", "10.20.0.0/16"))
    cluster = Cluster(untrusted={"isolation": iso})
    pod = cluster.pod("untrusted")
    assert allowed(cluster.objects, pod, Ip("169.254.1.1"), port=80)  # the exception works...
    assert allowed(cluster.objects, pod, Ip("10.20.3.4"), port=80)
    assert not allowed(cluster.objects, pod, Ip("169.254.169.254"), port=80)  # ...but not for metadata


def test_world_egress_by_trust_level(cluster: Cluster) -> None:
    assert not allowed(cluster.objects, cluster.pod("untrusted"), Ip(OUTSIDE), port=443)
    assert not allowed(cluster.objects, cluster.pod("untrusted"), Fqdn("pypi.org"), port=443)
    for level in ("standard", "trusted"):
        assert allowed(cluster.objects, cluster.pod(level), Ip(OUTSIDE), port=443), level
        assert allowed(cluster.objects, cluster.pod(level), Fqdn("pypi.org"), port=443), level


def test_untrusted_exceptions_open_exactly_what_was_granted() -> None:
    iso = TenantIsolationView(allowed_modes=frozenset({"whole"}), world_egress=False,
                              egress_cidrs=("198.51.100.0/24",), egress_fqdns=("*.huggingface.co", "pypi.org"))
    cluster = Cluster(untrusted={"isolation": iso})
    pod = cluster.pod("untrusted")
    assert allowed(cluster.objects, pod, Ip("198.51.100.9"), port=443)
    assert allowed(cluster.objects, pod, Fqdn("cdn.huggingface.co"), port=443)
    assert allowed(cluster.objects, pod, Fqdn("pypi.org"), port=443)
    assert not allowed(cluster.objects, pod, Ip(OUTSIDE), port=443)
    assert not allowed(cluster.objects, pod, Fqdn("files.pythonhosted.org"), port=443)
    assert not allowed(cluster.objects, pod, Fqdn("huggingface.co.evil.example"), port=443)
    # The exception is about the outside world; other tenants stay closed.
    assert not allowed(cluster.objects, pod, cluster.pod("standard"), port=8080)
