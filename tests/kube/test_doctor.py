"""`gpufleet doctor` against the Kubernetes API emulator: a cluster configured as the matrix says passes;
each way a real cluster goes wrong (issue 15) is named with its fix and fails the exit status.

The cluster's CRDs are the upstream files themselves (reference crds/), served by the emulator; the
rest (Kueue's manager ConfigMap, HAMi's webhook configuration, Karpenter's NodePools, node class,
deployment and nodes) is seeded in the shapes those charts and controllers write.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from django.core.management import CommandError, call_command

from infra.manifests import to_yaml
from scheduling import actions
from scheduling.inputs import load_catalog
from scheduling.prerequisites import COMPONENTS, PLATFORM_NAMESPACES, kueue_configuration, values_of
from tenants.render import RenderContext, render_platform
from tests.support.services import need_reference

from .emulator import EmulatorThread

pytestmark = pytest.mark.django_db
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are megabytes of YAML
CRD_FILES = (
    "kueue/kueue.x-k8s.io_clusterqueues.yaml", "kueue/kueue.x-k8s.io_localqueues.yaml",
    "kueue/kueue.x-k8s.io_resourceflavors.yaml", "kueue/kueue.x-k8s.io_cohorts.yaml",
    "kueue/kueue.x-k8s.io_topologies.yaml", "kueue/kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "kai-scheduler/scheduling.run.ai_queues.yaml", "kai-scheduler/scheduling.run.ai_podgroups.yaml",
    "kai-scheduler/kai.scheduler_topologies.yaml",
    "keda/keda.sh_scaledobjects.yaml", "kyverno/kyverno.io_policies.yaml", "kyverno/kyverno.io_clusterpolicies.yaml",
    "karpenter/karpenter.sh_nodepools.yaml", "karpenter/karpenter.sh_nodeclaims.yaml",
    "karpenter/karpenter.sh_nodeoverlays.yaml",
    "victoriametrics-operator/operator.victoriametrics.com_vmservicescrapes.yaml",
    "external-secrets/external-secrets.io_externalsecrets.yaml",
    # The prerequisites no release of the tree installs (issue 26, F9/F11): Flux's and Cilium's.
    "flux/helm.toolkit.fluxcd.io_helmreleases.yaml", "flux/source.toolkit.fluxcd.io_helmrepositories.yaml",
    "flux/source.toolkit.fluxcd.io_ocirepositories.yaml", "cilium/ciliumnetworkpolicies.yaml",
    # The capacity rule's kind by default (FleetSettings.rule_kind): a PrometheusRule.
    "prometheus-operator/monitoring.coreos.com_prometheusrules.yaml",
)


def put(kube: EmulatorThread, group: str, version: str, plural: str, obj: dict[str, Any]) -> None:
    key = (kmock.resource(group, version, plural), obj["metadata"].get("namespace"), obj["metadata"]["name"])
    kube.call(lambda: kube.emulator.objects.__setitem__(key, obj))


def drop(kube: EmulatorThread, group: str, version: str, plural: str, name: str, namespace: str | None = None) -> None:
    kube.call(lambda: kube.emulator.objects[kmock.resource(group, version, plural), namespace, name].delete())


@pytest.fixture
def catalog(db) -> None:
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    actions.create_flavor("h100-quarter", gpu_model=model.name, mode="hami", memory_percent=25, cores_percent=25,
                          capacity=32)
    actions.create_node_pool("h100-whole", flavor="h100", gpu_limit=16, instance_types=["p5.48xlarge"])
    actions.create_node_pool("h100-hami", flavor="h100-quarter", gpu_limit=8, instance_types=["p5.48xlarge"])


ESTABLISHED = {"conditions": [{"type": "Established", "status": "True"}]}


@pytest.fixture
def healthy(kube: EmulatorThread, catalog, settings) -> EmulatorThread:
    """A cluster installed from the platform's own output (with a vCluster syncer that keeps Kueue's gates:
    without one the doctor fails, issue 26 B3)."""
    settings.GPUFLEET_VCLUSTER_SYNCER_IMAGE = "registry.example.com/loft-sh/vcluster-pro:0.36.1-gates"
    reference = need_reference() / "crds"
    for name in CRD_FILES:
        crd = yaml.load((reference / name).read_text(), Loader=LOADER)
        crd["status"] = ESTABLISHED  # what the API server sets once it serves the kinds
        put(kube, "apiextensions.k8s.io", "v1", "customresourcedefinitions", crd)
    # The vCluster serving CA's path (issue 26, B6): OpenBao configured, External Secrets and its store Ready.
    settings.GPUFLEET_OPENBAO_ADDR = "http://openbao.example:8200"
    put(kube, "external-secrets.io", "v1", "clustersecretstores", {
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore", "metadata": {"name": "gpufleet-openbao"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    cat = load_catalog()["scheduling"]
    put(kube, "", "v1", "configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": to_yaml(kueue_configuration(cat))}})
    # As HAMi 2.10.0's charts/hami/templates/scheduler/webhook.yaml renders it with our values (fullnameOverride
    # vgpu names it vgpu-webhook), and Kyverno's resource webhooks and Kueue's pod webhook (issue 26 review F15).
    for name, hooks in (("kyverno-resource-mutating-webhook-cfg", [{"name": "mutate.kyverno.svc-ignore"},
                                                                   {"name": "mutate.kyverno.svc-fail"}]),
                        ("kueue-mutating-webhook-configuration", [{"name": "mpod.kb.io",
                                                                   "reinvocationPolicy": "IfNeeded"}])):
        put(kube, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": hooks})
    put(kube, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "vgpu-webhook"},
        "webhooks": [{"name": "vgpu.hami.io", "namespaceSelector": {"matchExpressions": [
            {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(PLATFORM_NAMESPACES)},
            {"key": "gpufleet.io/tenant", "operator": "Exists"}]}}]})
    for pool in (m for m in render_platform(RenderContext.from_settings()) if m["kind"] == "NodePool"):
        put(kube, "karpenter.sh", "v1", "nodepools", pool)
    put(kube, "karpenter.k8s.aws", "v1", "ec2nodeclasses",
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "gpu"}})
    put(kube, "apps", "v1", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "karpenter", "namespace": "karpenter"},
        "spec": {"template": {"spec": {"containers": [{"name": "controller", "env": [
            {"name": "FEATURE_GATES", "value": "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=true"}
        ]}]}}}})
    put(kube, "", "v1", "nodes", node("gpu-1", {"gpufleet.io/flavor": "h100", "kubernetes.io/hostname": "gpu-1",
                                                 "gpufleet.io/topology-block": "h100-whole",
                                                 "gpufleet.io/topology-rack": "h100-whole"}))
    put(kube, "apps", "v1", "daemonsets", hami_device_plugin(values_of(HAMI, cat)["devicePlugin"]))
    return kube


HAMI = next(c for c in COMPONENTS if c.name == "hami")


def hami_device_plugin(values: dict[str, Any]) -> dict[str, Any]:
    """The DaemonSet as HAMi 2.10.0's chart renders it: nodeSelector and tolerations straight from the values
    (charts/hami/templates/device-plugin/daemonsetnvidia.yaml:257-262; chart defaults `gpu: "on"` and none,
    charts/hami/values.yaml:419-421, merged under ours key by key)."""
    selector = {"gpu": "on", **values.get("nvidiaNodeSelector", {})}
    spec: dict[str, Any] = {"nodeSelector": selector, "containers": [{"name": "device-plugin"}]}
    if values.get("tolerations"):
        spec["tolerations"] = values["tolerations"]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "vgpu-device-plugin", "namespace": "hami-system"},
            "spec": {"template": {"spec": spec}}}


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def doctor(kube: EmulatorThread, tmp_path: Path, *args: str) -> tuple[list[dict], bool]:
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": kube.url}}],
        "users": [{"name": "emulator", "user": {"token": "x"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator"}}]}))
    from io import StringIO

    out = StringIO()
    try:
        call_command("doctor", "--json", "--kubeconfig", str(config), *args, stdout=out)
        failed = False
    except CommandError:
        failed = True
    return json.loads(out.getvalue()), failed


def failures(findings: list[dict]) -> dict[str, dict]:
    return {f["check"]: f for f in findings if not f["ok"]}


def test_a_cluster_installed_from_the_platform_output_passes(healthy, tmp_path) -> None:
    findings, failed = doctor(healthy, tmp_path)
    assert failures(findings) == {} and not failed
    checks = {f["check"] for f in findings}
    assert {"crd/clusterqueues.kueue.x-k8s.io", "crd/vmservicescrapes.operator.victoriametrics.com",
            "kueue/configuration", "hami/webhook",
            "karpenter/nodepool/h100-whole", "karpenter/nodepool/h100-whole/nodeclass", "karpenter/nodeoverlay",
            "topology/nodes"} <= checks


def test_a_misconfigured_kueue_is_named_with_its_fix(healthy, tmp_path, settings) -> None:
    config = kueue_configuration(load_catalog()["scheduling"])
    config["manageJobsWithoutQueueName"] = True
    config["integrations"]["frameworks"].remove("statefulset")
    config["metrics"] = {"bindAddress": ":8443"}  # Kueue's default: no ClusterQueue usage metrics
    put(healthy, "", "v1", "configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": to_yaml(config)}})
    settings.GPUFLEET_KUEUE_FAIR_SHARING = True
    findings, failed = doctor(healthy, tmp_path)
    found = failures(findings)
    assert failed
    assert set(found) == {"kueue/configuration/manageJobsWithoutQueueName", "kueue/configuration/integrations",
                          "kueue/configuration/fairSharing", "kueue/configuration/metrics"}
    assert "statefulset" in found["kueue/configuration/integrations"]["detail"]
    assert found["kueue/configuration/manageJobsWithoutQueueName"]["fix"] == "set manageJobsWithoutQueueName: false"


def test_broken_hami_karpenter_and_topology_are_found(healthy, tmp_path, settings) -> None:
    settings.GPUFLEET_TOPOLOGY_LEVELS = ["gpufleet.io/topology-block", "gpufleet.io/topology-rack",
                                         "kubernetes.io/hostname"]
    put(healthy, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "hami-webhook"}, "webhooks": [{"name": "vgpu.hami.io", "namespaceSelector": {}}]})
    pool = next(m for m in render_platform(RenderContext.from_settings()) if m["metadata"]["name"] == "h100-whole"
                and m["kind"] == "NodePool")
    stale = copy.deepcopy(pool)
    del stale["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.product"]  # the pre-issue-15 pool
    put(healthy, "karpenter.sh", "v1", "nodepools", stale)
    drop(healthy, "karpenter.k8s.aws", "v1", "ec2nodeclasses", "gpu")
    put(healthy, "", "v1", "nodes", node("gpu-2", {"gpufleet.io/flavor": "h100", "kubernetes.io/hostname": "gpu-2"}))
    drop(healthy, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "scaledobjects.keda.sh")
    findings, failed = doctor(healthy, tmp_path)
    found = failures(findings)
    assert failed
    assert {"hami/webhook", "hami/webhook/platform-namespaces", "hami/webhook/tenant-namespaces",
            "karpenter/nodepool/h100-whole", "karpenter/nodepool/h100-hami",
            "karpenter/nodepool/h100-whole/nodeclass", "karpenter/nodepool/h100-hami/nodeclass",
            "topology/node/gpu-2", "crd/scaledobjects.keda.sh",
            # the same missing CRD, as the bootstrap stage that waits for it (issue 26, B2)
            "bootstrap/crds",
            # HAMi's chart default name, hami-webhook, sorts before Kyverno's configuration (review F15)
            "webhooks/order/hami"} == set(found)
    assert "nvidia.com/gpu.product" in found["karpenter/nodepool/h100-whole"]["detail"]
    assert "gpufleet.io/topology-block" in found["topology/node/gpu-2"]["detail"]


def test_text_output_says_what_to_do(healthy, tmp_path, capsys) -> None:
    drop(healthy, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "nodeoverlays.karpenter.sh")
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "e",
        "clusters": [{"name": "e", "cluster": {"server": healthy.url}}], "users": [{"name": "e", "user": {}}],
        "contexts": [{"name": "e", "context": {"cluster": "e", "user": "e"}}]}))
    with pytest.raises(CommandError, match="1 check"):
        call_command("doctor", "--kubeconfig", str(config))
    out = capsys.readouterr().out
    assert "FAIL karpenter/nodeoverlay" in out and "fix: install Karpenter >= 1.7" in out


def test_a_check_the_cluster_refuses_is_a_failure_not_a_crash(healthy, tmp_path) -> None:
    pools = kmock.resource("karpenter.sh", "v1", "nodepools")
    healthy.call(lambda: healthy.emulator["get", pools] << kmock.KubernetesError(
        status=403, reason="Forbidden", message="nodepools is forbidden: User cannot list resource nodepools"))
    findings, failed = doctor(healthy, tmp_path)
    found = failures(findings)
    assert failed and {"karpenter", "hami/device-plugin"} <= set(found)
    assert "nodepools is forbidden" in found["karpenter"]["detail"]


def test_a_refused_node_list_is_a_failure_too(healthy, tmp_path, settings) -> None:
    settings.GPUFLEET_TOPOLOGY_LEVELS = ["gpufleet.io/topology-block"]  # the topology check reads nodes
    for pool in (m for m in render_platform(RenderContext.from_settings()) if m["kind"] == "NodePool"):
        put(healthy, "karpenter.sh", "v1", "nodepools", pool)
    healthy.call(lambda: healthy.emulator["get", kmock.resource("", "v1", "nodes")] << kmock.KubernetesError(
        status=403, reason="Forbidden", message="nodes is forbidden: User cannot list resource nodes"))
    findings, failed = doctor(healthy, tmp_path)
    found = failures(findings)
    assert failed and set(found) == {"topology/nodes", "nodes/system"}  # both read the node list
    assert "nodes is forbidden" in found["topology/nodes"]["detail"]
    assert "nodes is forbidden" in found["nodes/system"]["detail"]


def untrusted_tenant(kube: EmulatorThread) -> list[dict[str, Any]]:
    """An untrusted tenant as the platform renders it, on the cluster: its namespace, vCluster and NodePools."""
    from tenants.models import Phase
    from tenants.reconcile import desired_manifests
    from tests.support import factories

    gamma = factories.tenant("gamma", "untrusted", phase=Phase.READY)
    actions.set_quota(gamma, flavor="h100", nominal=4, borrowing_limit=0)
    manifests = desired_manifests(gamma)
    for m in manifests:
        if m["kind"] == "Namespace":
            put(kube, "", "v1", "namespaces", m)
        elif m["kind"] == "HelmRelease":
            put(kube, "helm.toolkit.fluxcd.io", "v2", "helmreleases", m)
        elif m["kind"] == "NodePool":
            put(kube, "karpenter.sh", "v1", "nodepools", m)
    return manifests


def test_a_tenant_rendered_by_the_platform_passes_the_vcluster_checks(healthy, tmp_path) -> None:
    untrusted_tenant(healthy)
    findings, failed = doctor(healthy, tmp_path)
    assert failures(findings) == {} and not failed
    ok = {f["check"]: f["detail"] for f in findings}
    assert ok["vcluster/coredns/tenant-gamma"] == "CoreDNS passes Pod Security restricted"
    assert ok["vcluster/cpu-nodes/tenant-gamma"] == "pods without GPUs run on NodePool cpu-gamma"
    assert ok["vcluster/syncer/tenant-gamma"].startswith(
        "syncer registry.example.com/loft-sh/vcluster-pro:0.36.1-gates")
    assert ok["hami/device-plugin/h100-hami"] == "HAMi's device plugin runs on its nodes"
    assert ok["kueue/topology"] == "no ResourceFlavor uses topology-aware scheduling"


def test_each_issue_26_blocker_class_is_named_with_its_fix(healthy, tmp_path, settings) -> None:
    """B1 a TAS flavor in a mixed ClusterQueue, B3 a syncer that strips Kueue's gates, B4 CoreDNS without seccomp
    and no CPU pool for a dedicated tenant, B5 HAMi's device plugin on the chart's defaults."""
    manifests = untrusted_tenant(healthy)
    # B1: what the platform rendered before (GPUFLEET_TOPOLOGY_LEVELS had a default).
    put(healthy, "kueue.x-k8s.io", "v1beta2", "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "topologyName": "gpu-topology"}})
    queue = next(m for m in manifests if m["kind"] == "ClusterQueue")
    put(healthy, "kueue.x-k8s.io", "v1beta2", "clusterqueues", queue)
    # B3: the stock syncer, on the cluster and in the settings.
    settings.GPUFLEET_VCLUSTER_SYNCER_IMAGE = ""
    release = copy.deepcopy(next(m for m in manifests if m["kind"] == "HelmRelease"))
    release["spec"]["values"]["controlPlane"]["statefulSet"].pop("image")
    # B4: the values before the fix, and no CPU pool.
    release["spec"]["values"]["controlPlane"].pop("coredns")
    put(healthy, "helm.toolkit.fluxcd.io", "v2", "helmreleases", release)
    drop(healthy, "karpenter.sh", "v1", "nodepools", "cpu-gamma")
    # B5: HAMi's device plugin with the chart's defaults.
    put(healthy, "apps", "v1", "daemonsets", hami_device_plugin({}))
    findings, failed = doctor(healthy, tmp_path)
    found = failures(findings)
    assert failed
    assert set(found) == {"kueue/topology/h100", "vcluster/syncer", "vcluster/syncer/tenant-gamma",
                          "vcluster/coredns/tenant-gamma", "vcluster/cpu-nodes/tenant-gamma",
                          "hami/device-plugin/h100-hami"}
    assert "supports only" not in found["kueue/topology/h100"]["detail"]
    assert "non-TAS gpufleet-host flavor" in found["kueue/topology/h100"]["detail"]
    assert "used by tenant-gamma" in found["kueue/topology/h100"]["detail"]
    assert "topologyName is immutable" in found["kueue/topology/h100"]["fix"]
    assert "diff.go:163" in found["vcluster/syncer/tenant-gamma"]["detail"]
    assert "GPUFLEET_VCLUSTER_SYNCER_IMAGE" in found["vcluster/syncer"]["fix"]
    assert "no seccomp profile" in found["vcluster/coredns/tenant-gamma"]["detail"]
    assert "stay Pending" in found["vcluster/cpu-nodes/tenant-gamma"]["detail"]
    assert "does not tolerate nvidia.com/gpu=true:NoSchedule" in found["hami/device-plugin/h100-hami"]["detail"]


# --- issue 26: the blocker classes that stop a tenant (scheduling.doctor_blockers) ----------------------------


def test_the_blocker_checks_pass_on_a_healthy_fleet(healthy, tmp_path) -> None:
    findings, _ = doctor(healthy, tmp_path)
    ok = {f["check"] for f in findings if f["ok"]}
    assert {"vcluster/ca", "delivery/argocd", "delivery/flux", "bootstrap/order", "argocd/progressive-syncs",
            "nodes/system", "webhooks/order"} <= ok


def test_a_missing_vcluster_ca_is_a_failure(healthy, tmp_path, settings) -> None:
    """B6: no CA the kubeconfig could carry; then a CA store without OpenBao or without its ClusterSecretStore."""
    settings.GPUFLEET_VCLUSTER_CA_STORE = ""
    found = failures(doctor(healthy, tmp_path)[0])
    assert "x509: certificate signed by unknown authority" in found["vcluster/ca"]["detail"]
    settings.GPUFLEET_VCLUSTER_CA_STORE = "gpufleet-openbao"
    settings.GPUFLEET_OPENBAO_ADDR = ""
    drop(healthy, "external-secrets.io", "v1", "clustersecretstores", "gpufleet-openbao")
    found = failures(doctor(healthy, tmp_path)[0])
    assert "OpenBao is not configured" in found["vcluster/ca"]["detail"]
    assert found["vcluster/ca/store"]["detail"] == "ClusterSecretStore gpufleet-openbao does not exist"


def test_a_cluster_without_delivery_credentials_is_a_failure(healthy, tmp_path) -> None:
    """B7: a remote cluster with an API URL only cannot get its Flux Kustomizations a kubeConfig."""
    from scheduling.models import Cluster

    Cluster.objects.create(name="edge", kube_api="https://edge.example:6443")
    found = failures(doctor(healthy, tmp_path)[0])
    # ... and the doctor cannot read it either (issue 26, F4/F9/F11 checks per cluster).
    assert set(found) == {"delivery/flux", "cluster/edge"}
    assert "cluster edge: it has an API URL but no kubeconfig_secret" in found["delivery/flux"]["detail"]
    assert found["cluster/edge"]["detail"].startswith("cannot check cluster edge: no way to read it")


def test_crds_of_the_platform_releases_not_established_are_a_failure(healthy, tmp_path) -> None:
    """B2: on a fresh cluster the configs and tenants stages wait for these; the doctor names them."""
    crd = yaml.load((need_reference() / "crds" / "kueue/kueue.x-k8s.io_clusterqueues.yaml").read_text(), Loader=LOADER)
    put(healthy, "apiextensions.k8s.io", "v1", "customresourcedefinitions", crd)  # no Established condition
    found = failures(doctor(healthy, tmp_path)[0])
    assert "clusterqueues.kueue.x-k8s.io (HelmRelease flux-system/kueue)" in found["bootstrap/crds"]["detail"]


def test_a_platform_kind_no_stage_installs_is_a_bootstrap_failure() -> None:
    """B2, in the tree itself: a custom resource whose CRD no release of the platform installs."""
    from scheduling.doctor_blockers import check_bootstrap

    orphan = {"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "w"}}
    (finding,) = check_bootstrap(lambda path: None, [orphan])
    assert not finding.ok and "Widget.example.io" in finding.detail


# --- issue 26 review findings F8, F13, F15 (scheduling.doctor_review) ----------------------------------------


def argocd(kube: EmulatorThread, value: str | None, env: dict[str, Any] | None = None) -> None:
    """Argo CD's ApplicationSet CRD, argocd-cmd-params-cm and the controller as its v3.5.1 manifest runs it
    (manifests/base/applicationset-controller/argocd-applicationset-controller-deployment.yaml:154-157)."""
    crd = yaml.load((need_reference() / "crds" / "argocd/applicationset-crd.yaml").read_text(), Loader=LOADER)
    crd["status"] = ESTABLISHED
    put(kube, "apiextensions.k8s.io", "v1", "customresourcedefinitions", crd)
    data = {} if value is None else {"applicationsetcontroller.enable.progressive.syncs": value}
    put(kube, "", "v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "argocd-cmd-params-cm", "namespace": "argocd"},
                                       "data": data})
    variable = env or {"valueFrom": {"configMapKeyRef": {
        "name": "argocd-cmd-params-cm", "key": "applicationsetcontroller.enable.progressive.syncs", "optional": True}}}
    put(kube, "apps", "v1", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "argocd-applicationset-controller", "namespace": "argocd"},
        "spec": {"template": {"spec": {"containers": [{
            "name": "argocd-applicationset-controller", "args": ["/usr/local/bin/argocd-applicationset-controller"],
            "env": [{"name": "ARGOCD_APPLICATIONSET_CONTROLLER_ENABLE_PROGRESSIVE_SYNCS", **variable}]}]}}}})


def test_argocd_without_progressive_syncs_is_a_failure(healthy, tmp_path) -> None:
    """F8: the RollingSync strategy the ApplicationSets carry is ignored while progressive syncs are off (the
    default): the doctor says so and how to turn them on."""
    argocd(healthy, None)
    found = failures(doctor(healthy, tmp_path)[0])
    assert "progressive syncs are off (argocd/argocd-cmd-params-cm)" in found["argocd/progressive-syncs"]["detail"]
    assert 'applicationsetcontroller.enable.progressive.syncs: "true"' in found["argocd/progressive-syncs"]["fix"]
    argocd(healthy, "true")
    assert "argocd/progressive-syncs" not in failures(doctor(healthy, tmp_path)[0])
    argocd(healthy, "true", env={"value": "false"})  # a literal value in the controller's environment wins
    assert "its environment" in failures(doctor(healthy, tmp_path)[0])["argocd/progressive-syncs"]["detail"]


def test_a_cluster_with_only_tainted_nodes_has_nowhere_for_control_planes(healthy, tmp_path) -> None:
    """F13: the control planes of tenants without dedicated nodes need an untainted node (or pool)."""
    put(healthy, "", "v1", "nodes", {**node("gpu-1", {"gpufleet.io/flavor": "h100"}), "spec": {
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}})
    found = failures(doctor(healthy, tmp_path)[0])
    assert "control planes of tenants without dedicated nodes" in found["nodes/system"]["detail"]
    put(healthy, "", "v1", "nodes", node("system-1", {}))
    assert "nodes/system" not in failures(doctor(healthy, tmp_path)[0])


def test_hami_called_before_kyverno_is_a_failure(healthy, tmp_path) -> None:
    """F15: HAMi's chart default name (hami-webhook) sorts before Kyverno's configuration."""
    hami = healthy.call(lambda: copy.deepcopy(healthy.emulator.objects[kmock.resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"), None, "vgpu-webhook"]))
    drop(healthy, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "vgpu-webhook")
    put(healthy, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
        {**dict(hami), "metadata": {"name": "hami-webhook"}})
    found = failures(doctor(healthy, tmp_path)[0])
    assert "hami-webhook is called before Kyverno's kyverno-resource-mutating-webhook-cfg" in (
        found["webhooks/order/hami"]["detail"])


# --- review 2, N3 (scheduling.doctor_review.check_device_envvar) ---------------------------------------------


def gpu_operator(kube: EmulatorThread, toolkit: dict[str, Any]) -> None:
    """The GPU operator's CRD (its name and group as the operator ships them) and a ClusterPolicy."""
    put(kube, "apiextensions.k8s.io", "v1", "customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterpolicies.nvidia.com"}, "status": ESTABLISHED})
    put(kube, "nvidia.com", "v1", "clusterpolicies", {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
                                                      "metadata": {"name": "cluster-policy"},
                                                      "spec": {"toolkit": toolkit}})


def test_a_toolkit_accepting_the_device_envvar_from_unprivileged_pods_is_a_failure(healthy, tmp_path) -> None:
    """N3: with the toolkit's default, NVIDIA_VISIBLE_DEVICES=all gives an unprivileged container every GPU of its
    node; the doctor reads the GPU operator's toolkit env and says how to turn it off."""
    check = "gpu-operator/device-envvar/cluster-policy"
    gpu_operator(healthy, {"enabled": True, "env": [{"name": "CONTAINERD_SET_AS_DEFAULT", "value": "true"}]})
    found = failures(doctor(healthy, tmp_path)[0])
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED is not set (default true)" in found[check]["detail"]
    assert 'ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED="false"' in found[check]["fix"]
    gpu_operator(healthy, {"env": [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "yes"}]})
    assert "not a boolean" in failures(doctor(healthy, tmp_path)[0])[check]["detail"]
    gpu_operator(healthy, {"env": [{"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
                                    "value": "false"}]})
    findings = doctor(healthy, tmp_path)[0]
    assert check not in failures(findings)
    assert any(f["check"] == check and f["ok"] for f in findings)


def test_a_toolkit_the_doctor_cannot_read_is_named_a_prerequisite(healthy, tmp_path) -> None:
    findings = doctor(healthy, tmp_path)[0]
    (finding,) = [f for f in findings if f["check"] == "gpu-operator/device-envvar"]
    assert finding["ok"] and "a prerequisite, docs/operator-guide.md" in finding["detail"]
    gpu_operator(healthy, {"enabled": False})
    findings = doctor(healthy, tmp_path)[0]
    (finding,) = [f for f in findings if f["check"] == "gpu-operator/device-envvar/cluster-policy"]
    assert finding["ok"] and "installed outside the GPU operator" in finding["detail"]
