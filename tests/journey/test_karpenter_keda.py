"""The last legs of a GPU pod's journey, against the real rendered fleet: which NodePool creates its node
(Karpenter v1.14.1), whether pools' nodes carry the topology levels when configured (KAI), and
whether each endpoint's ScaledObject scales a real host Deployment on a scraped metric (KEDA v2.20.2).

The fleet: a trusted tenant using HAMi (with an inference endpoint), a standard tenant using MIG and an
untrusted tenant with whole GPUs on dedicated nodes, rendered through the ordinary render path. Host
pods are built from the rendered objects the way the components would: the vCluster syncer adds the
placement nodeSelector/tolerations from the tenant's vcluster.yaml, Kueue admission adds the flavor's
nodeLabels and tolerations (ResourceFlavor spec).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import pytest

from scheduling import actions
from tenants.backends import get_schema_registry
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, render_platform
from tests.support import factories
from tests.support.services import need_reference

from .steps import karpenter, keda

pytestmark = pytest.mark.django_db
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# Node labels no NodePool sets: the kubelet's hostname, and the offering's zone/region Karpenter writes.
AUTOMATIC_LABELS = {"kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region"}


@dataclass
class Fleet:
    manifests: list[dict[str, Any]]

    def find(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        for m in self.manifests:
            if m["kind"] == kind and m["metadata"]["name"] == name and (
                    namespace is None or m["metadata"].get("namespace") == namespace):
                return m
        raise AssertionError(f"no {kind} {name} rendered")

    def without(self, kind: str) -> Fleet:
        return Fleet([m for m in self.manifests if m["kind"] != kind])


@pytest.fixture
def fleet(db) -> Fleet:
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    actions.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=14)
    actions.create_flavor("h100-quarter", gpu_model=model.name, mode="hami", memory_percent=25, cores_percent=25,
                          capacity=32)
    actions.create_node_pool("h100-whole", flavor="h100", gpu_limit=16, instance_types=["p5.48xlarge"])
    actions.create_node_pool("h100-mig", flavor="h100-3g", gpu_limit=8, instance_types=["p5.48xlarge"])
    actions.create_node_pool("h100-hami", flavor="h100-quarter", gpu_limit=8, instance_types=["p5.48xlarge"])
    acme = factories.tenant("acme", "trusted", phase=Phase.READY)
    beta = factories.tenant("beta", "standard", phase=Phase.READY)
    gamma = factories.tenant("gamma", "untrusted", phase=Phase.READY)
    actions.set_quota(acme, flavor="h100-quarter", nominal=8)
    actions.set_quota(acme, flavor="h100", nominal=2, borrowing_limit=0)
    actions.set_quota(beta, flavor="h100-3g", nominal=7, borrowing_limit=0)
    actions.set_quota(gamma, flavor="h100", nominal=4, borrowing_limit=2)
    actions.create_endpoint(acme, "chat", model=MODEL, tier="standard")
    actions.create_endpoint(gamma, "private", model=MODEL, tier="batch")
    manifests = list(render_platform(RenderContext.from_settings()))
    for tenant in (acme, beta, gamma):
        manifests.extend(desired_manifests(tenant))
    return Fleet(manifests)


def synced_pod(fleet: Fleet, slug: str, resources: dict[str, str]) -> dict[str, Any]:
    """The host pod as vCluster's syncer writes it: placement from the tenant's vcluster.yaml
    (sync.fromHost.nodes.selector.labels becomes the pod's nodeSelector; enforceTolerations are added)."""
    values = fleet.find("HelmRelease", "vcluster", f"tenant-{slug}")["spec"]["values"]
    selector = dict(values.get("sync", {}).get("fromHost", {}).get("nodes", {}).get("selector", {}).get("labels", {}))
    tolerations = []
    for text in values["sync"]["toHost"]["pods"].get("enforceTolerations", []):
        key, value, effect = re.fullmatch(r"([^=]+)=([^:]*):(\w+)", text).groups()
        tolerations.append({"key": key, "operator": "Equal", "value": value, "effect": effect})
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "cuda", "resources": {"limits": resources}}]}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-x-default-x-vcluster",
                                                            "namespace": f"tenant-{slug}"}, "spec": spec}


def admitted(fleet: Fleet, pod: dict[str, Any], flavor: str) -> dict[str, Any]:
    """Kueue's admission injects the flavor's nodeLabels and tolerations (ResourceFlavor spec, v0.19.2
    pkg/podset: Merge of nodeSelector and tolerations on ungating)."""
    spec = fleet.find("ResourceFlavor", flavor)["spec"]
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeSelector"] = {**pod["spec"].get("nodeSelector", {}), **spec.get("nodeLabels", {})}
    pod["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []), *spec.get("tolerations", [])]
    return pod


def test_the_fleet_the_journeys_run_on_validates_against_upstream_schemas(fleet) -> None:
    need_reference()
    assert get_schema_registry().validate(fleet.manifests) == []
    kinds = {m["kind"] for m in fleet.manifests}
    assert {"NodePool", "NodeOverlay", "Deployment", "Service", "VMServiceScrape", "ScaledObject",
            "HelmRelease", "OCIRepository"} <= kinds


JOURNEYS = [
    # (tenant, flavor, container resources, the pool that must create the node)
    ("acme", "h100-quarter", {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25",
                              "nvidia.com/gpucores": "25"}, "h100-hami"),
    ("beta", "h100-3g", {"nvidia.com/mig-3g.40gb": "1"}, "h100-mig"),
    ("gamma", "h100", {"nvidia.com/gpu": "8"}, "h100-whole-gamma"),
]


@pytest.mark.parametrize(("slug", "flavor", "resources", "pool"), JOURNEYS, ids=["trusted-hami", "standard-mig",
                                                                                "untrusted-whole"])
def test_every_admitted_gpu_pod_gets_a_node_from_the_right_pool(fleet, slug, flavor, resources, pool) -> None:
    pod = admitted(fleet, synced_pod(fleet, slug, resources), flavor)
    result = karpenter.step(pod, fleet)
    assert result.ok, result.reason
    assert result.pod["metadata"]["annotations"]["gpufleet.io/journey-nodepool"] == pool
    labels = karpenter.node_labels(result)
    # The node really satisfies what the scheduler will check: every nodeSelector entry.
    assert all(labels.get(k) == v for k, v in pod["spec"]["nodeSelector"].items())


def test_untrusted_pods_only_get_their_own_nodes(fleet) -> None:
    pod = admitted(fleet, synced_pod(fleet, "gamma", {"nvidia.com/gpu": "1"}), "h100")
    shared_only = Fleet([m for m in fleet.manifests
                         if not (m["kind"] == "NodePool" and "gpufleet.io/tenant" in m["metadata"]["labels"])])
    refused = karpenter.step(pod, shared_only)
    assert not refused.ok
    assert 'label "gpufleet.io/dedicated-tenant" does not have known values' in refused.reason
    # Another tenant's pods cannot use gamma's pool: they do not tolerate its taint.
    other = admitted(fleet, synced_pod(fleet, "beta", {"nvidia.com/gpu": "1"}), "h100")
    chosen = karpenter.step(other, fleet)
    assert chosen.ok and chosen.pod["metadata"]["annotations"]["gpufleet.io/journey-nodepool"] == "h100-whole"
    dedicated = fleet.find("NodePool", "h100-whole-gamma")
    # nominal 4 + borrowing 2 = 6 GPUs, rounded up to one whole 8-GPU node (Karpenter counts whole nodes).
    assert dedicated["spec"]["limits"]["nvidia.com/gpu"] == 8
    assert dedicated["metadata"]["labels"]["gpufleet.io/tenant"] == "gamma"
    # No topology levels by default (issue 26, B1): a pool's nodes carry none.
    assert not any(k.startswith("gpufleet.io/topology-") for k in dedicated["spec"]["template"]["metadata"]["labels"])


def test_pools_pin_the_gpu_model_and_refuse_other_models(fleet) -> None:
    for pool in karpenter.node_pools(fleet):
        assert karpenter.pins_gpu_model(pool), pool["metadata"]["name"]
        if pool["spec"]["template"]["metadata"]["labels"].get("gpufleet.io/node-role") == "cpu":
            continue  # a dedicated tenant's CPU pool (B4): pinned to CPU instance types, no GPU name

        gpu_names = [r for r in pool["spec"]["template"]["spec"]["requirements"]
                     if r["key"] == "karpenter.k8s.aws/instance-gpu-name"]
        assert gpu_names == [{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]}]
    pod = admitted(fleet, synced_pod(fleet, "beta", {"nvidia.com/gpu": "1"}), "h100")
    pod["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
    result = karpenter.step(pod, fleet)
    assert not result.ok and "nvidia.com/gpu.product" in result.reason


def test_karpenter_model_follows_upstream_compatibility_rules() -> None:
    """Requirements.Compatible (v1.14.1): undefined custom labels refuse, undefined well-known labels pass,
    NotIn/DoesNotExist on an undefined custom label pass; taints need tolerations; limits bound."""
    pool = {"kind": "NodePool", "metadata": {"name": "p"}, "spec": {"limits": {"nvidia.com/gpu": 4}, "template": {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                   "values": ["p5.48xlarge"]}],
                 "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}}}}
    tolerating = [{"key": "gpu", "operator": "Exists"}]

    def pod(selector: dict[str, str], gpus: str = "1", tolerations: Any = tolerating, affinity: Any = None) -> dict:
        spec = {"nodeSelector": selector, "tolerations": tolerations,
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
        if affinity:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": affinity}]}}}
        return {"metadata": {"name": "x"}, "spec": spec}

    assert karpenter.step(pod({"team": "a", "kubernetes.io/os": "linux"}), [pool]).ok
    assert 'label "rack" does not have known values' in karpenter.step(pod({"rack": "r1"}), [pool]).reason
    assert karpenter.step(pod({}, affinity=[{"key": "rack", "operator": "DoesNotExist"}]), [pool]).ok
    assert "team" in karpenter.step(pod({"team": "b"}), [pool]).reason
    assert "did not tolerate gpu=true:NoSchedule" in karpenter.step(pod({}, tolerations=[]), [pool]).reason
    assert "limit nvidia.com/gpu=4 is below one node's 8 GPUs" in karpenter.step(pod({}, gpus="8"), [pool]).reason
    unpinned = copy.deepcopy(pool)
    unpinned["spec"]["template"]["spec"]["requirements"] = []
    assert "may launch any GPU" in karpenter.step(pod({}), [unpinned]).reason


def test_no_flavor_is_kueue_topology_aware_by_default(fleet) -> None:
    """Issue 26, B1: the shipped defaults render no Kueue Topology and no topologyName (nodepools.kueue_tas_refusal)."""
    assert not [m for m in fleet.manifests if m["kind"] == "Topology"]
    assert not [m for m in fleet.manifests if m["kind"] == "ResourceFlavor" and "topologyName" in m["spec"]]


@pytest.mark.parametrize("levels", [["gpufleet.io/topology-block", "gpufleet.io/topology-rack",
                                     "kubernetes.io/hostname"]])
def test_topology_levels_label_the_pools_and_feed_kai_only(db, settings, levels) -> None:
    """The documented option GPUFLEET_TOPOLOGY_LEVELS: each pool's nodes carry the levels (one domain per pool)
    and KAI gets a Topology; Kueue's flavors still carry no topologyName (it would refuse every pod)."""
    settings.GPUFLEET_TOPOLOGY_LEVELS = levels
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    actions.create_node_pool("h100-whole", flavor="h100", gpu_limit=16, instance_types=["p5.48xlarge"])
    manifests = render_platform(RenderContext.from_settings())
    assert [m["apiVersion"] for m in manifests if m["kind"] == "Topology"] == ["kai.scheduler/v1alpha1"]
    assert not [m for m in manifests if m["kind"] == "ResourceFlavor" and "topologyName" in m["spec"]]
    pool = next(m for m in manifests if m["kind"] == "NodePool")
    labels = pool["spec"]["template"]["metadata"]["labels"]
    assert labels["gpufleet.io/topology-block"] == labels["gpufleet.io/topology-rack"] == "h100-whole"


def test_topology_is_off_for_flavors_without_pools(db) -> None:
    model = actions.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, "NVIDIA-A100-SXM4-80GB")
    actions.create_flavor("a100", gpu_model=model.name, mode="whole", capacity=8)
    flavors = [m for m in render_platform(RenderContext.from_settings()) if m["kind"] == "ResourceFlavor"]
    assert "topologyName" not in flavors[0]["spec"]


def test_every_scaled_object_scales_a_host_deployment_on_a_scraped_metric(fleet) -> None:
    need_reference()
    scaled = fleet.find("ScaledObject", "endpoint-chat", "tenant-acme")
    result = keda.resolve(scaled, fleet)
    assert result.ok, result.reason
    assert "VMServiceScrape/endpoint-chat" in result.reason
    # The serving pod itself is a GPU pod: through Kueue's whole-GPU flavor it gets a node too.
    template = fleet.find("Deployment", "endpoint-chat", "tenant-acme")["spec"]["template"]
    serving = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "endpoint-chat-1", "namespace": "tenant-acme", **template["metadata"]},
               "spec": copy.deepcopy(template["spec"])}
    assert keda.step(serving, fleet).ok
    assert karpenter.step(admitted(fleet, serving, "h100"), fleet).ok
    # Tenant pods inside the virtual cluster reach it by a name of their own cluster.
    values = fleet.find("HelmRelease", "vcluster", "tenant-acme")["spec"]["values"]
    assert values["networking"]["replicateServices"]["fromHost"] == [
        {"from": "tenant-acme/endpoint-chat", "to": "default/endpoint-chat"}]


def test_an_untrusted_tenants_endpoint_runs_on_its_own_nodes(fleet) -> None:
    """The serving pod is not synced by vCluster, so the render must place it: on gamma's pool only."""
    assert keda.resolve(fleet.find("ScaledObject", "endpoint-private", "tenant-gamma"), fleet).ok
    template = fleet.find("Deployment", "endpoint-private", "tenant-gamma")["spec"]["template"]
    serving = {"metadata": {"name": "endpoint-private-1", "namespace": "tenant-gamma", **template["metadata"]},
               "spec": copy.deepcopy(template["spec"])}
    result = karpenter.step(admitted(fleet, serving, "h100"), fleet)
    assert result.ok, result.reason
    assert result.pod["metadata"]["annotations"]["gpufleet.io/journey-nodepool"] == "h100-whole-gamma"


def test_pods_without_gpus_never_get_gpu_nodes(fleet) -> None:
    """The vCluster control plane and system pods tolerate no GPU taint: every GPU pool refuses them
    (they run on the cluster's general nodes), so they never cost a GPU node."""
    pod = {"metadata": {"name": "vcluster-0", "namespace": "tenant-gamma"},
           "spec": {"containers": [{"name": "syncer", "resources": {"requests": {"cpu": "200m"}}}]}}
    result = karpenter.step(pod, fleet)
    assert not result.ok
    gpu_pools = [p for p in karpenter.node_pools(fleet) if "nvidia.com/gpu" in p["spec"]["limits"]]
    assert result.reason.count("did not tolerate nvidia.com/gpu=true:NoSchedule") == len(gpu_pools)
    # The untrusted tenant's CPU pool (B4) takes only its own pods: they carry its nodeSelector and toleration.
    assert "cpu-gamma: did not tolerate gpufleet.io/dedicated-tenant=gamma:NoSchedule" in result.reason


def test_keda_refuses_missing_targets_and_unscraped_metrics(fleet) -> None:
    scaled = fleet.find("ScaledObject", "endpoint-chat", "tenant-acme")
    in_vcluster = copy.deepcopy(scaled)
    in_vcluster["spec"]["scaleTargetRef"]["name"] = "chat"  # the tenant's Deployment inside its vCluster
    refused = keda.resolve(in_vcluster, fleet)
    assert not refused.ok and "does not exist in host namespace tenant-acme" in refused.reason
    unscraped = keda.resolve(scaled, fleet.without("VMServiceScrape"))
    assert not unscraped.ok and "ignoreNullValues makes it read 0 forever" in unscraped.reason
    wrong_model = copy.deepcopy(scaled)
    wrong_model["spec"]["triggers"][0]["metadata"]["query"] = 'sum(vllm:num_requests_waiting{model_name="x"})'
    assert "model_name 'x' is not served" in keda.resolve(wrong_model, fleet).reason
    gpu_util = copy.deepcopy(scaled)
    gpu_util["spec"]["triggers"][0]["metadata"]["query"] = 'avg(DCGM_FI_DEV_GPU_UTIL{namespace="tenant-acme"})'
    assert "not a vLLM metric" in keda.resolve(gpu_util, fleet).reason


def test_modelled_vllm_metric_names_are_the_upstream_ones() -> None:
    notes = (need_reference() / "vllm-metrics.md").read_text()
    for metric in keda.VLLM_METRICS:
        assert f"`{metric}`" in notes, metric
