"""The cluster components the platform relies on, installed by the platform's own GitOps output. Pure.

Every tenant object we render assumes a configuration of Kueue, KAI Scheduler, HAMi, KEDA and Kyverno
(issue 15). Leaving those settings to whoever installs the cluster is how a schema-valid fleet fails on
a real one, so the platform renders the Flux sources and HelmReleases that install them, with the
values it depends on, into `platform/` (see `gpufleet render --platform`). `COMPONENTS` is the
compatibility matrix in code: `docs/compatibility.md` explains it and `gpufleet doctor` checks a live
cluster against it (scheduling.doctor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.core import sharing
from infra.manifests import INSTALLS_CRDS, TENANT_LABEL, Manifest, to_yaml
from scheduling import context
from scheduling.nodepools import render as nodepools
from tenants.render import RenderContext, platform_metadata

from .inputs import Catalog

HELM = "helm.toolkit.fluxcd.io/v2"
SOURCE = "source.toolkit.fluxcd.io/v1"

# Kueue v0.19.2 integration names (pkg/controller/jobs/*: FrameworkName; charts/kueue/values.yaml).
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "pod", "statefulset",
                    "deployment")
# Namespaces of the platform's own components: never mutated by HAMi's webhook.
PLATFORM_NAMESPACES = ("kube-system", "flux-system", "kueue-system", "kai-scheduler", "hami-system", "keda",
                       "kyverno", "monitoring", "karpenter", "gpu-operator")
# HAMi's webhook is called only in tenant namespaces (chart value scheduler.admissionWebhook.namespaceSelector,
# appended to the webhook's namespaceSelector by charts/hami/templates/scheduler/webhook.yaml:43-45 @v2.10.0).
HAMI_WEBHOOK_SCOPE = {"key": TENANT_LABEL, "operator": "Exists"}


@dataclass(frozen=True)
class Component:
    name: str
    namespace: str
    chart: str
    version: str  # the chart version the platform installs
    supported: str  # the version range the platform is tested/modelled against
    repository: str  # https:// (HelmRepository) or oci:// (OCIRepository)
    crds: tuple[tuple[str, str], ...]  # (CRD name, API version that must be served)
    why: str

    @property
    def oci(self) -> bool:
        return self.repository.startswith("oci://")


COMPONENTS: tuple[Component, ...] = (
    Component("kueue", "kueue-system", "kueue", "0.19.2", ">=0.19.0 <0.20", "oci://registry.k8s.io/kueue/charts/kueue",
              (("clusterqueues.kueue.x-k8s.io", "v1beta2"), ("localqueues.kueue.x-k8s.io", "v1beta2"),
               ("resourceflavors.kueue.x-k8s.io", "v1beta2"), ("cohorts.kueue.x-k8s.io", "v1beta2"),
               ("topologies.kueue.x-k8s.io", "v1beta2"), ("workloadpriorityclasses.kueue.x-k8s.io", "v1beta2")),
              "GPU quota, fair sharing, borrowing, flavors, topology-aware placement"),
    Component("kai-scheduler", "kai-scheduler", "kai-scheduler", "v0.13.0", ">=0.13.0 <0.14",
              "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler",
              (("queues.scheduling.run.ai", "v2"), ("podgroups.scheduling.run.ai", "v2alpha2"),
               # the platform renders KAI Topologies too (deployments/kai-scheduler/crds/, v0.13.0)
               ("topologies.kai.scheduler", "v1alpha1")),
              "gang scheduling and hierarchical GPU queues"),
    Component("hami", "hami-system", "hami", "2.10.0", ">=2.10.0 <2.11", "https://project-hami.github.io/HAMi/",
              (), "fractional GPUs (memory/cores) for trusted tenants"),
    Component("keda", "keda", "keda", "2.20.2", ">=2.20.0 <2.21", "https://kedacore.github.io/charts",
              (("scaledobjects.keda.sh", "v1alpha1"),), "scale-to-zero inference on vLLM queue depth"),
    Component("kyverno", "kyverno", "kyverno", "3.9.0", "chart 3.9.x = Kyverno >=1.19.0 <1.20",
              "https://kyverno.github.io/kyverno/",
              (("policies.kyverno.io", "v1"), ("clusterpolicies.kyverno.io", "v1")),
              "per-tenant GPU mode policy and mutate rules"),
)
# Not installed by the platform (provider-specific or per tenant), but checked by `gpufleet doctor`.
KARPENTER = Component("karpenter", "karpenter", "karpenter", "1.14.1", ">=1.0 (karpenter.sh/v1), modelled on 1.14.1",
                      "", (("nodepools.karpenter.sh", "v1"), ("nodeclaims.karpenter.sh", "v1")),
                      "GPU nodes on demand, one pool per flavor and per dedicated tenant")
VM_OPERATOR = Component("victoriametrics-operator", "monitoring", "victoria-metrics-operator", "0.74.1",
                        ">=0.74 (operator.victoriametrics.com/v1beta1)", "",
                        (("vmservicescrapes.operator.victoriametrics.com", "v1beta1"),),
                        "scrapes the serving pods whose vLLM metrics drive KEDA")


@dataclass(frozen=True)
class Prerequisite:
    """A CRD the tree renders objects of (or a chart of the tree needs) that no HelmRelease of the tree installs:
    the operator installs it on every host cluster first. `gpufleet doctor` checks each on every cluster it can
    read (scheduling.doctor_clusters); docs/operator-guide.md lists them."""

    component: str
    crd: str
    version: str  # the API version that must be served
    why: str


# The capacity rule's kind (FleetSettings.rule_kind, scheduling.fleetops.queues.RULE_KINDS) -> its CRD.
RULE_CRDS = {"PrometheusRule": ("prometheus-operator CRDs", "prometheusrules.monitoring.coreos.com", "v1"),
             "VMRule": ("VictoriaMetrics operator", "vmrules.operator.victoriametrics.com", "v1beta1")}


def cluster_prerequisites(cat: Catalog, *, external_secrets: bool, rule_kind: str = "") -> tuple[Prerequisite, ...]:
    """What one host cluster with catalog `cat` needs installed before its tree is applied."""
    out = [
        # Both sync paths (Flux and Argo CD) push the controllers stage as HelmReleases and their sources
        # (issue 26, F9): Flux's source-controller and helm-controller run on every cluster.
        Prerequisite("Flux helm-controller", "helmreleases.helm.toolkit.fluxcd.io", "v2",
                     "the controllers stage and each tenant's vCluster are HelmReleases"),
        Prerequisite("Flux source-controller", "helmrepositories.source.toolkit.fluxcd.io", "v1",
                     "the HelmReleases' chart sources"),
        Prerequisite("Flux source-controller", "ocirepositories.source.toolkit.fluxcd.io", "v1",
                     "the HelmReleases' OCI chart sources"),
        Prerequisite("Karpenter", "nodepools.karpenter.sh", "v1", "GPU node pools and dedicated tenants' pools"),
        Prerequisite("Cilium", "ciliumnetworkpolicies.cilium.io", "v2", "tenant isolation and endpoint egress"),
        Prerequisite("VictoriaMetrics operator", "vmservicescrapes.operator.victoriametrics.com", "v1beta1",
                     "scrapes the serving pods whose vLLM metrics drive KEDA"),
    ]
    if any(nodepools.overlay_capacity(p) for p in cat.node_pools):
        out.append(Prerequisite("Karpenter (feature gate NodeOverlay=true)", "nodeoverlays.karpenter.sh",
                                "v1alpha1", "MIG slices / HAMi shares of the pools' nodes"))
    if external_secrets:
        out.append(Prerequisite("External Secrets Operator", "externalsecrets.external-secrets.io", "v1",
                                "each vCluster's serving CA (and gated models' tokens) from OpenBao"))
    if cat.prometheus_operator:
        out.append(Prerequisite("prometheus-operator CRDs", "servicemonitors.monitoring.coreos.com", "v1",
                                "Kueue's chart renders a ServiceMonitor (GPUFLEET_PROMETHEUS_OPERATOR=true)"))
    if cat.prometheus_operator and rule_kind in RULE_CRDS:  # rendered only then (fleetops.render)
        component, crd, version = RULE_CRDS[rule_kind]
        out.append(Prerequisite(component, crd, version, f"the capacity alerts (a {rule_kind}, fleet settings)"))
    return tuple(out)


def kueue_configuration(cat: Catalog) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2, apis/config/v1beta2/configuration_types.go
    at v0.19.2), passed whole as the chart's managerConfig.controllerManagerConfigYaml."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # The capacity signals read kueue_cluster_queue_resource_usage (scheduling.fleetops.queues), which
        # Kueue only reports with this on (apis/config/v1beta2/configuration_types.go:182-185 @v0.19.2).
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Only pods/jobs that name a queue are Kueue's; the tenant's GPU pods get the label from a
        # Kyverno mutate rule, so the vCluster control plane and system pods are never gated.
        "manageJobsWithoutQueueName": False,
        # Pod-based integrations (pod, deployment, statefulset) only act in matching namespaces: the
        # tenants', never the platform's own.
        "managedJobsNamespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        # ClusterQueues quota what they declare; the namespace's ResourceQuota/LimitRange bound the rest.
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
    }
    if cat.fair_sharing:
        # ClusterQueue/Cohort fairSharing.weight does nothing without this block (v1beta2 FairSharing).
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    return config


def values_of(component: Component, cat: Catalog) -> dict[str, Any]:
    if component.name == "kueue":
        return {
            "managerConfig": {"controllerManagerConfigYaml": to_yaml(kueue_configuration(cat))},
            # Beta and on by default since v0.14 (pkg/features/kube_features.go); pinned so an upgrade
            # that flips it shows up here.
            "controllerManager": {"featureGates": [{"name": "TopologyAwareScheduling", "enabled": True}]},
            # Admission order (docs/scheduling.md): the API server calls mutating webhook configurations
            # sorted by name, and `kueue-…` sorts before Kyverno's, whose routing policy adds the queue
            # label. IfNeeded makes the API server call Kueue's pod webhook again after Kyverno changed the
            # pod, so the label is seen and the pod gated (chart value mutatingWebhook.reinvocationPolicy,
            # charts/kueue/templates/webhook/manifests.yaml, v0.19.2; the chart default is Never).
            "mutatingWebhook": {"reinvocationPolicy": "IfNeeded"},
            # Nobody scrapes Kueue without this (chart default false, charts/kueue/values.yaml:10 @v0.19.2):
            # the chart then renders a ServiceMonitor for its metrics Service and lets the scraper's
            # namespace read the endpoints (templates/prometheus/monitor.yaml, role.yaml). The
            # VictoriaMetrics operator converts ServiceMonitors into VMServiceScrapes.
            # The chart's ServiceMonitor is a monitoring.coreos.com object: rendered only when the operator says
            # the cluster serves that CRD (GPUFLEET_PROMETHEUS_OPERATOR, off by default: no prerequisite the
            # platform requires installs it, and Flux/Argo CD would fail the whole controllers stage on it;
            # issue 26, F11). `gpufleet doctor` checks the CRD when it is on.
            "enablePrometheus": cat.prometheus_operator,
            "metrics": {"prometheusNamespace": cat.monitoring_namespace},
        }
    if component.name == "hami":
        return {
            # Resource names our flavors, quotas and policies use (scheduling.catalog): chart defaults,
            # pinned because HAMi's webhook and scheduler key everything on them.
            # The webhook configuration is named "<fullname>-webhook" (charts/hami/templates/_helpers.tpl,
            # hami-vgpu.scheduler.webhook, v2.10.0): "vgpu-webhook" sorts after Kyverno's
            # "kyverno-resource-mutating-webhook-cfg", so Kyverno names KAI for whole/MIG pods before HAMi
            # looks at them and HAMi skips pods that already name another scheduler (docs/scheduling.md).
            "fullnameOverride": "vgpu",
            "resourceName": sharing.GPU_RESOURCE,
            "resourceMem": sharing.HAMI_MEMORY,
            "resourceMemPercentage": sharing.HAMI_MEMORY_PERCENT,
            "resourceCores": sharing.HAMI_CORES,
            "schedulerName": sharing.HAMI.scheduler,
            # The webhook skips namespaces labelled hami.io/webhook=ignore (chart templates/scheduler/
            # webhook.yaml); the platform's own namespaces are excluded by name as well. And it is called for
            # tenant namespaces only (HAMI_WEBHOOK_SCOPE): HAMi denies any pod that asks for nvidia.com/gpu
            # with `nodeName` already set ("pod has node assigned", HAMi@v2.10.0:pkg/scheduler/webhook.go:
            # 106-112), which is exactly the GPU operator's validator pods (nvidia.com/gpu: 1, bound to their
            # node), in whatever namespace the operator was installed.
            "scheduler": {"admissionWebhook": {"enabled": True, "manageNamespaceSelector": True,
                                               "whitelistNamespaces": list(PLATFORM_NAMESPACES),
                                               "namespaceSelector": {"matchExpressions": [HAMI_WEBHOOK_SCOPE]}}},
            # The device plugin runs where `devicePlugin.nvidiaNodeSelector` says, tolerating only
            # `devicePlugin.tolerations` (Project-HAMi/HAMi@v2.10.0:charts/hami/templates/device-plugin/
            # daemonsetnvidia.yaml:257-262). The chart's defaults, `gpu: "on"` and none
            # (charts/hami/values.yaml:419-421), matched no node of ours and tolerated no GPU taint, so no
            # node ever offered a HAMi share (issue 26, B5). Helm merges maps key by key, so the default key
            # stays: our HAMi pools carry both labels (scheduling.nodepools.render.HAMI_NODE_LABELS).
            "devicePlugin": {"nvidiaNodeSelector": dict(nodepools.HAMI_NODE_SELECTOR),
                             "tolerations": nodepools.hami_device_plugin_tolerations(cat)},
        }
    return {}


def source(component: Component, ctx: RenderContext) -> Manifest:
    meta = platform_metadata(component.name, ctx.flux_namespace)
    if component.oci:
        return {"apiVersion": SOURCE, "kind": "OCIRepository", "metadata": meta,
                "spec": {"interval": "1h", "url": component.repository, "ref": {"tag": component.version},
                         "layerSelector": {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
                                           "operation": "copy"}}}
    return {"apiVersion": SOURCE, "kind": "HelmRepository", "metadata": meta,
            "spec": {"interval": "1h", "url": component.repository}}


def helm_release(component: Component, ctx: RenderContext, cat: Catalog) -> Manifest:
    spec: dict[str, Any] = {
        "interval": "10m",
        "releaseName": component.name,
        "targetNamespace": component.namespace,
        "install": {"createNamespace": True, "crds": "CreateReplace", "remediation": {"retries": 3}},
        "upgrade": {"crds": "CreateReplace", "remediation": {"retries": 3, "remediateLastFailure": True}},
        "values": values_of(component, cat),
    }
    ref = {"kind": "OCIRepository" if component.oci else "HelmRepository", "name": component.name,
           "namespace": ctx.flux_namespace}
    if component.oci:
        spec["chartRef"] = ref
    else:
        spec["chart"] = {"spec": {"chart": component.chart, "version": component.version, "sourceRef": ref,
                                  "interval": "1h"}}
    meta = platform_metadata(component.name, ctx.flux_namespace, **{"gpufleet.io/component": component.name})
    if component.crds:
        # What this release installs, so the kube backend waits for these CRDs (not PermanentError) and applies
        # the custom resources after them (docs/compatibility.md, "B2 bootstrap order").
        meta["annotations"] = {INSTALLS_CRDS: ",".join(name for name, _ in component.crds)}
    return {"apiVersion": HELM, "kind": "HelmRelease", "metadata": meta, "spec": spec}


def render_prerequisites(ctx: RenderContext) -> list[Manifest]:
    cat = context.catalog_in(ctx) or Catalog()
    out: list[Manifest] = []
    for component in COMPONENTS:
        out.append(source(component, ctx))
        out.append(helm_release(component, ctx, cat))
    return out
