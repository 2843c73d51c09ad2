"""`gpufleet doctor` per registered cluster (issue 26 review findings F4, F5, F9, F11), against two API emulators:
the cluster the command's --kubeconfig reads (`default`, installed as the matrix says) and a `training` cluster the
doctor reaches through its kubeconfig_secret, as the kube backend does (infra.kube.clusters.kubeconfig_path).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduling import actions
from scheduling.clusters import actions as cluster_actions
from scheduling.doctor_clusters import KARPENTER_DEFAULT_GATES, node_overlay_gate, parse_gates
from tests.support.services import need_reference

from . import test_doctor as base
from .emulator import EmulatorThread
from .test_doctor import ESTABLISHED, LOADER, doctor, drop, failures, node, put

# The cluster the command's kubeconfig reads, installed from the platform's output (tests/kube/test_doctor.py).
catalog, healthy = base.catalog, base.healthy
pytestmark = pytest.mark.django_db
SECRET = "gpufleet-cluster-training"
# What a cluster with a HAMi pool needs that the tree does not install (prerequisites.cluster_prerequisites).
TRAINING_CRDS = (
    "flux/helm.toolkit.fluxcd.io_helmreleases.yaml", "flux/source.toolkit.fluxcd.io_helmrepositories.yaml",
    "flux/source.toolkit.fluxcd.io_ocirepositories.yaml", "cilium/ciliumnetworkpolicies.yaml",
    "karpenter/karpenter.sh_nodepools.yaml", "karpenter/karpenter.sh_nodeoverlays.yaml",
    "victoriametrics-operator/operator.victoriametrics.com_vmservicescrapes.yaml",
    "external-secrets/external-secrets.io_externalsecrets.yaml",
    "prometheus-operator/monitoring.coreos.com_prometheusrules.yaml",
)
HELMRELEASES = "helmreleases.helm.toolkit.fluxcd.io"
SERVICEMONITORS = "servicemonitors.monitoring.coreos.com"


def crd(kube: EmulatorThread, path: str) -> None:
    obj = yaml.load((need_reference() / "crds" / path).read_text(), Loader=LOADER)
    obj["status"] = ESTABLISHED
    put(kube, "apiextensions.k8s.io", "v1", "customresourcedefinitions", obj)


def karpenter(kube: EmulatorThread, *, env: list[dict[str, Any]] | None = None, args: list[str] | None = None,
              namespace: str = "kube-system") -> None:
    """Karpenter's controller Deployment as its chart renders it: FEATURE_GATES from settings.featureGates."""
    container: dict[str, Any] = {"name": "controller", "env": env or []}
    if args is not None:
        container["args"] = args
    put(kube, "apps", "v1", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "karpenter", "namespace": namespace},
        "spec": {"template": {"spec": {"containers": [container]}}}})


def gates(value: str) -> list[dict[str, Any]]:
    return [{"name": "FEATURE_GATES", "value": value}]


@pytest.fixture
def training(healthy: EmulatorThread, settings, tmp_path: Path) -> Iterator[EmulatorThread]:
    """A second cluster with a HAMi pool, reachable through its kubeconfig Secret's mounted file."""
    remote = EmulatorThread().start()
    try:
        for path in TRAINING_CRDS:
            crd(remote, path)
        karpenter(remote, env=gates("ReservedCapacity=true,NodeOverlay=true"))
        mounted = tmp_path / "clusters"
        (mounted / SECRET).mkdir(parents=True)
        (mounted / SECRET / "kubeconfig").write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "training",
            "clusters": [{"name": "training", "cluster": {"server": remote.url}}],
            "users": [{"name": "training", "user": {"token": "x"}}],
            "contexts": [{"name": "training", "context": {"cluster": "training", "user": "training"}}]}))
        settings.GPUFLEET_CLUSTER_KUBECONFIG_DIR = str(mounted)
        cluster_actions.create_cluster("training", purpose="training", kubeconfig_secret=SECRET)
        actions.set_cluster_flavor("training", "h100-quarter", capacity=16)
        actions.create_node_pool("training-h100-hami", flavor="h100-quarter", gpu_limit=8, cluster="training",
                                 instance_types=["p5.48xlarge"])
        yield remote
    finally:
        remote.stop()


def test_every_registered_cluster_it_can_read_passes(training, healthy, tmp_path) -> None:
    findings, failed = doctor(healthy, tmp_path)
    assert failures(findings) == {} and not failed
    ok = {f["check"]: f["detail"] for f in findings}
    assert ok["pools/training/h100-quarter"] == "flavor h100-quarter on cluster training: NodePool training-h100-hami"
    assert ok["pools/default/h100"] == "flavor h100 on cluster default: NodePool h100-whole"
    assert ok["cluster/training"] == "cluster training read"
    assert ok[f"prerequisites/training/{HELMRELEASES}"] == f"{HELMRELEASES} serves v2 (Flux helm-controller)"
    assert ok["prerequisites/default/ciliumnetworkpolicies.cilium.io"].endswith("(Cilium)")
    assert ok["karpenter/feature-gates/training"].startswith("NodeOverlay=true on cluster training (FEATURE_GATES=")


def test_a_flavor_offered_without_a_pool_fails_naming_cluster_and_flavor(training, healthy, tmp_path) -> None:
    """F5: training offers whole H100s but has no pool for them; a static node with the flavor's labels counts."""
    actions.set_cluster_flavor("training", "h100", capacity=8)
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {"pools/training/h100"}
    assert found["pools/training/h100"]["detail"].startswith(
        "flavor h100 (whole) is offered on cluster training but no node pool there provides it")
    assert "--flavor h100 --cluster training" in found["pools/training/h100"]["fix"]
    put(training, "", "v1", "nodes", node("static-1", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                                        "gpufleet.io/gpu-mode": "whole"}))
    findings, failed = doctor(healthy, tmp_path)
    assert failures(findings) == {} and not failed
    ok = {f["check"]: f["detail"] for f in findings}
    assert ok["pools/training/h100"] == "flavor h100 on cluster training: no NodePool, static node(s) static-1"


def test_the_node_overlay_gate_is_checked_on_each_cluster_with_mig_or_hami_pools(training, healthy,
                                                                                 tmp_path) -> None:
    """F4: NodeOverlay is off by default (karpenter@v1.14.1:pkg/operator/options/options.go:134)."""
    karpenter(training, env=gates("ReservedCapacity=true,SpotToSpotConsolidation=false"))
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {"karpenter/feature-gates/training"}
    assert found["karpenter/feature-gates/training"]["detail"].startswith("NodeOverlay is off on cluster training")
    assert "settings.featureGates.nodeOverlay=true" in found["karpenter/feature-gates/training"]["fix"]
    # The flag wins over the environment variable.
    karpenter(training, env=gates("NodeOverlay=false"), args=["--feature-gates=NodeOverlay=true"])
    assert failures(doctor(healthy, tmp_path)[0]) == {}
    # No Deployment where Karpenter's chart puts it: said, not assumed.
    drop(training, "apps", "v1", "deployments", "karpenter", "kube-system")
    found = failures(doctor(healthy, tmp_path)[0])
    assert found["karpenter/feature-gates/training"]["detail"].startswith(
        "cannot check the NodeOverlay gate on cluster training: no Deployment karpenter/karpenter or "
        "kube-system/karpenter")
    # And the cluster the command reads (HAMi pool h100-hami) is checked too.
    karpenter(healthy, env=gates("NodeOverlay=false"), namespace="karpenter")
    assert "karpenter/feature-gates/default" in failures(doctor(healthy, tmp_path)[0])


def test_the_gate_is_read_as_karpenter_reads_it() -> None:
    assert parse_gates(KARPENTER_DEFAULT_GATES)["NodeOverlay"] is False
    deployment = {"spec": {"template": {"spec": {"containers": [{"name": "controller"}]}}}}
    assert node_overlay_gate(deployment) == (False, "Karpenter's default (options.go:134)")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "FEATURE_GATES", "valueFrom": {"configMapKeyRef": {"name": "k", "key": "g"}}}]
    assert node_overlay_gate(deployment)[0] is None
    container["env"] = gates("NodeOverlay=True")
    assert node_overlay_gate(deployment)[0] is True
    container["args"] = ["--feature-gates", "NodeOverlay=false"]
    assert node_overlay_gate(deployment) == (False, "--feature-gates=NodeOverlay=false")
    container["args"] = ["--feature-gates=NodeOverlay=maybe"]
    assert node_overlay_gate(deployment)[0] is None


def test_missing_prerequisite_crds_are_named_per_cluster(training, healthy, tmp_path, settings) -> None:
    """F9: helm-controller on every cluster; F11: the ServiceMonitor CRD once Kueue's chart renders one."""
    drop(training, "apiextensions.k8s.io", "v1", "customresourcedefinitions", HELMRELEASES)
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {f"prerequisites/training/{HELMRELEASES}"}
    assert found[f"prerequisites/training/{HELMRELEASES}"]["detail"].startswith(
        f"{HELMRELEASES} is not installed on cluster training")
    assert "install Flux helm-controller on cluster training" in found[f"prerequisites/training/{HELMRELEASES}"]["fix"]
    crd(training, "flux/helm.toolkit.fluxcd.io_helmreleases.yaml")
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {f"prerequisites/training/{SERVICEMONITORS}", f"prerequisites/default/{SERVICEMONITORS}"}
    for kube in (training, healthy):
        crd(kube, "prometheus-operator/monitoring.coreos.com_servicemonitors.yaml")
    assert failures(doctor(healthy, tmp_path)[0]) == {}


def test_a_cluster_it_cannot_read_says_what_was_not_checked(training, healthy, tmp_path, settings) -> None:
    """No kubeconfig where the cluster's Secret would be mounted: said, with what was not checked."""
    settings.GPUFLEET_CLUSTER_KUBECONFIG_DIR = str(tmp_path / "elsewhere")
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {"cluster/training"}
    detail = found["cluster/training"]["detail"]
    assert detail.startswith("cannot check cluster training: cannot load the kubeconfig")
    assert f"not checked: {HELMRELEASES}" in detail and "Karpenter's NodeOverlay gate" in detail
    # The model's side of F5 is still checked without the cluster.
    actions.set_cluster_flavor("training", "h100", capacity=8)
    assert {"cluster/training", "pools/training/h100"} == set(failures(doctor(healthy, tmp_path)[0]))


def test_the_capacity_rule_kind_needs_its_crd_on_each_cluster(training, healthy, tmp_path, settings) -> None:
    """F11: the capacity alerts are a PrometheusRule or a VMRule (fleet settings); each needs its CRD -- where they
    are rendered at all, i.e. with Kueue scraped (GPUFLEET_PROMETHEUS_OPERATOR, review N2)."""
    from scheduling.fleetops.models import FleetSettings

    assert failures(doctor(healthy, tmp_path)[0]) == {}  # off: no rule rendered, no rule CRD needed
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    for kube in (training, healthy):
        crd(kube, "prometheus-operator/monitoring.coreos.com_servicemonitors.yaml")
    fleet = FleetSettings.current()
    fleet.rule_kind = "VMRule"
    fleet.save()
    found = failures(doctor(healthy, tmp_path)[0])
    assert set(found) == {"prerequisites/training/vmrules.operator.victoriametrics.com",
                          "prerequisites/default/vmrules.operator.victoriametrics.com"}
    assert "install VictoriaMetrics operator on cluster training" in found[
        "prerequisites/training/vmrules.operator.victoriametrics.com"]["fix"]
    for kube in (training, healthy):
        crd(kube, "victoriametrics-operator/operator.victoriametrics.com_vmrules.yaml")
    assert failures(doctor(healthy, tmp_path)[0]) == {}
