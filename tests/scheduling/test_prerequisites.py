"""The platform output installs what the platform relies on: Flux sources and HelmReleases for Kueue,
KAI Scheduler, HAMi, KEDA and Kyverno, valid against the upstream Flux CRDs, with the settings the
tenant objects assume (issue 15, "make the prerequisites part of the product")."""

from __future__ import annotations

import copy

import pytest
import yaml
from django.core.management import call_command

from scheduling.catalog import rules as catalog
from scheduling.prerequisites import COMPONENTS, PLATFORM_NAMESPACES
from tenants.backends import get_schema_registry
from tenants.render import RenderContext, render_platform
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db


def releases() -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in render_platform(RenderContext.from_settings())
            if m["kind"] == "HelmRelease"}


def kueue_config() -> dict:
    return yaml.safe_load(releases()["kueue"]["spec"]["values"]["managerConfig"]["controllerManagerConfigYaml"])


def test_every_component_is_installed_from_a_pinned_source_and_validates() -> None:
    need_reference()
    platform = render_platform(RenderContext.from_settings())
    assert get_schema_registry().validate(platform) == []
    found = releases()
    assert set(found) == {c.name for c in COMPONENTS}
    sources = {(m["kind"], m["metadata"]["name"]): m for m in platform
               if m["apiVersion"].startswith("source.toolkit.fluxcd.io/")}
    for component in COMPONENTS:
        spec = found[component.name]["spec"]
        assert spec["targetNamespace"] == component.namespace
        if component.oci:
            assert spec["chartRef"]["kind"] == "OCIRepository"
            assert sources[("OCIRepository", component.name)]["spec"]["ref"] == {"tag": component.version}
        else:
            assert spec["chart"]["spec"]["version"] == component.version
            assert ("HelmRepository", component.name) in sources


def test_a_misspelled_release_field_fails_validation() -> None:
    need_reference()
    broken = copy.deepcopy(releases()["kueue"])
    broken["spec"]["chartRefs"] = broken["spec"].pop("chartRef")
    assert get_schema_registry().validate([broken])


def test_kueue_manages_only_labelled_gpu_work_in_tenant_namespaces() -> None:
    config = kueue_config()
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["manageJobsWithoutQueueName"] is False
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [{"key": "gpufleet.io/tenant", "operator": "Exists"}]}
    assert set(config["integrations"]["frameworks"]) == {
        "pod", "batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob", "statefulset", "deployment"}
    assert "fairSharing" not in config  # off unless the platform says so


def test_fair_sharing_follows_the_setting(settings) -> None:
    settings.GPUFLEET_KUEUE_FAIR_SHARING = True
    assert kueue_config()["fairSharing"] == {
        "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def test_hami_uses_our_resource_names_and_skips_platform_namespaces() -> None:
    values = releases()["hami"]["spec"]["values"]
    assert values["resourceCores"] == catalog.HAMI_CORES
    assert values["resourceMemPercentage"] == catalog.HAMI_MEMORY_PERCENT
    webhook = values["scheduler"]["admissionWebhook"]
    assert webhook["manageNamespaceSelector"] is True
    assert {"kube-system", "kueue-system", "kyverno", "flux-system"} <= set(webhook["whitelistNamespaces"])
    assert set(webhook["whitelistNamespaces"]) == set(PLATFORM_NAMESPACES)


def hami_namespace_selector(values: dict) -> list[dict]:
    """The webhook's namespaceSelector.matchExpressions as HAMi@v2.10.0:charts/hami/templates/scheduler/
    webhook.yaml:25-46 renders them from the release values (manageNamespaceSelector on)."""
    webhook = values["scheduler"]["admissionWebhook"]
    out = [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
    if webhook.get("whitelistNamespaces"):
        out.append({"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": webhook["whitelistNamespaces"]})
    out.extend((webhook.get("namespaceSelector") or {}).get("matchExpressions") or [])
    return out


def selects(expressions: list[dict], labels: dict[str, str]) -> bool:
    """metav1.LabelSelector matchExpressions (In/NotIn/Exists/DoesNotExist)."""
    for e in expressions:
        value = labels.get(e["key"])
        ok = {"In": value in e.get("values", []), "NotIn": value not in e.get("values", []),
              "Exists": e["key"] in labels, "DoesNotExist": e["key"] not in labels}[e["operator"]]
        if not ok:
            return False
    return True


@pytest.mark.parametrize("namespace", ["gpu-operator", "nvidia-gpu-operator", "default", "monitoring"])
def test_hami_webhook_never_sees_the_gpu_operators_validator_pods(namespace: str) -> None:
    """HAMi@v2.10.0:pkg/scheduler/webhook.go:106-112 denies a pod asking for nvidia.com/gpu whose nodeName is
    set ("pod has node assigned"): the GPU operator's device-plugin validator is such a pod. Wherever the
    operator is installed (the namespace name is the operator's choice), HAMi's webhook must not be called."""
    selector = hami_namespace_selector(releases()["hami"]["spec"]["values"])
    assert not selects(selector, {"kubernetes.io/metadata.name": namespace})


def test_hami_webhook_still_sees_a_trusted_tenants_pods() -> None:
    selector = hami_namespace_selector(releases()["hami"]["spec"]["values"])
    tenant = {"kubernetes.io/metadata.name": "tenant-acme", "gpufleet.io/tenant": "acme"}
    assert selects(selector, tenant)
    assert not selects(selector, {**tenant, "hami.io/webhook": "ignore"})  # a tenant without HAMi


# Kyverno's MutatingWebhookConfiguration (kyverno v1.19.0, config/... "kyverno-resource-mutating-webhook-cfg").
KYVERNO_MUTATING_WEBHOOK = "kyverno-resource-mutating-webhook-cfg"


def test_hamis_device_plugin_selects_and_tolerates_the_hami_pools(settings) -> None:
    """Issue 26 B5: the chart's defaults (`gpu: "on"`, no tolerations; charts/hami/values.yaml:419-421 at v2.10.0)
    matched no node of ours; the release names the HAMi pools' labels and tolerates their taints."""
    plugin = releases()["hami"]["spec"]["values"]["devicePlugin"]
    assert plugin["nvidiaNodeSelector"] == {"gpu": "on", "gpufleet.io/gpu-mode": "hami"}
    assert {t["key"] for t in plugin["tolerations"]} >= {"nvidia.com/gpu", "gpufleet.io/trust-levels"}
    assert all(t["operator"] == "Exists" and "effect" not in t for t in plugin["tolerations"])


def test_webhooks_run_in_the_order_the_journeys_assume() -> None:
    """The API server calls mutating webhook configurations sorted by name. Kyverno's routing must reach
    Kueue's pod webhook (Kueue sorts first, so it must be called again: IfNeeded) and precede HAMi's
    (whose configuration is "<fullname>-webhook": the release's fullnameOverride must sort after)."""
    found = releases()
    kueue, hami = found["kueue"]["spec"]["values"], found["hami"]["spec"]["values"]
    assert kueue["mutatingWebhook"]["reinvocationPolicy"] == "IfNeeded"
    kueue_webhook = f"{kueue.get('fullnameOverride', 'kueue')}-mutating-webhook-configuration"
    hami_webhook = f"{hami['fullnameOverride']}-webhook"
    assert sorted([kueue_webhook, KYVERNO_MUTATING_WEBHOOK, hami_webhook]) == [
        kueue_webhook, KYVERNO_MUTATING_WEBHOOK, hami_webhook]


def test_render_platform_shows_them(capsys) -> None:
    call_command("render", "--platform")
    kinds = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert ("HelmRelease", "kueue") in kinds and ("OCIRepository", "kai-scheduler") in kinds


def test_kueue_is_scraped_and_reports_cluster_queue_usage(settings) -> None:
    """The capacity alerts read kueue_admission_wait_time_seconds and kueue_cluster_queue_resource_usage:
    the chart scrapes nothing by default (kueue@v0.19.2:charts/kueue/values.yaml:10 `enablePrometheus:
    false`) and usage is reported only with metrics.enableClusterQueueResources
    (apis/config/v1beta2/configuration_types.go:182-185)."""
    settings.GPUFLEET_MONITORING_NAMESPACE = "observability"
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    values = releases()["kueue"]["spec"]["values"]
    assert values["enablePrometheus"] is True
    assert values["metrics"]["prometheusNamespace"] == "observability"
    assert kueue_config()["metrics"]["enableClusterQueueResources"] is True


def test_kueue_renders_no_service_monitor_unless_the_clusters_serve_its_crd(settings) -> None:
    """Issue 26, F11: `enablePrometheus` makes Kueue's chart render a monitoring.coreos.com ServiceMonitor
    (charts/kueue/templates/prometheus/monitor.yaml @v0.19.2); no prerequisite the platform requires installs that
    CRD, so it is off unless GPUFLEET_PROMETHEUS_OPERATOR says the clusters serve it."""
    from scheduling.inputs import Catalog
    from scheduling.prerequisites import cluster_prerequisites

    assert settings.GPUFLEET_PROMETHEUS_OPERATOR is False
    assert releases()["kueue"]["spec"]["values"]["enablePrometheus"] is False
    assert "servicemonitors.monitoring.coreos.com" not in {
        p.crd for p in cluster_prerequisites(Catalog(), external_secrets=True)}
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True
    assert releases()["kueue"]["spec"]["values"]["enablePrometheus"] is True
    assert "servicemonitors.monitoring.coreos.com" in {
        p.crd for p in cluster_prerequisites(Catalog(prometheus_operator=True), external_secrets=True)}
