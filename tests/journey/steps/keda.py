"""Does a ScaledObject's target and trigger resolve to real host objects and a scraped metric? A model.

Facts modelled:
- KEDA v2.20.2 (kedacore/keda): `scaleTargetRef` is resolved in the ScaledObject's own namespace,
  `apiVersion` defaulting to apps/v1 and `kind` to Deployment (`apis/keda/v1alpha1/scaledobject_types.go`,
  `controllers/keda/scaledobject_controller.go` checkTargetResourceIsScalable: "ScaledObject doesn't
  have correct scaleTargetRef specification" / target not found).
- KEDA's prometheus scaler (`pkg/scalers/prometheus_scaler.go`): with `ignoreNullValues: "true"` an
  empty query result is 0, not an error -- a metric nobody scrapes silently reads 0.
- vCluster v0.36.1 (`chart/values.schema.json` `SyncToHost`): Deployments are not synced to the host,
  so only host objects (the GitOps render) count as targets.
- VictoriaMetrics operator v0.74.1 VMServiceScrape / prometheus-operator v0.93.0 ServiceMonitor:
  `spec.selector` selects Services in the object's namespace (unless `namespaceSelector`), each
  `endpoints[].port` names a Service port; the targets' series get a `namespace` label (the pod's).
  PodMonitor / VMPodScrape select pods directly and name a container port.
- vLLM 0.33.0 (reference vllm-metrics.md): `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` ...
  each labelled `model_name` = `--served-model-name` (default: `--model`).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from . import StepResult

# vLLM 0.33.0 gauges a ScaledObject may scale on (reference vllm-metrics.md; tests check this list).
VLLM_METRICS = frozenset({"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"})
SERVICE_SCRAPES = {"VMServiceScrape", "ServiceMonitor"}
POD_SCRAPES = {"PodMonitor", "VMPodScrape"}
_METRIC = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"')


def manifests_of(fleet: Any) -> list[dict[str, Any]]:
    return list(getattr(fleet, "manifests", fleet))


def _ns(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("namespace", "")


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector:
        return False  # an empty selector in our render would be a bug: select nothing, loudly
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values", []))
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def find_target(scaled: dict[str, Any], fleet: Any) -> dict[str, Any] | None:
    ref = scaled["spec"]["scaleTargetRef"]
    api, kind = ref.get("apiVersion", "apps/v1"), ref.get("kind", "Deployment")
    return next((m for m in manifests_of(fleet) if m.get("apiVersion") == api and m.get("kind") == kind
                 and m["metadata"]["name"] == ref["name"] and _ns(m) == _ns(scaled)), None)


def served_model(container: dict[str, Any]) -> str:
    args = [*container.get("command", []), *container.get("args", [])]
    for flag in ("--served-model-name", "--model"):
        if flag in args and args.index(flag) + 1 < len(args):
            return args[args.index(flag) + 1]
    return ""


def scraped_ports(pod_template: dict[str, Any], namespace: str, fleet: Any) -> list[str]:
    """Names of the scrape objects that would scrape pods of this template (with the port they use)."""
    labels = pod_template.get("metadata", {}).get("labels", {})
    ports = {p.get("name") for c in pod_template["spec"].get("containers", []) for p in c.get("ports", [])}
    everything = manifests_of(fleet)
    services = [m for m in everything if m.get("kind") == "Service" and _ns(m) == namespace
                and m["spec"].get("selector") and all(labels.get(k) == v for k, v in m["spec"]["selector"].items())]
    found = []
    for scrape in (m for m in everything if _ns(m) == namespace):
        if scrape.get("kind") in SERVICE_SCRAPES:
            for service in services:
                if not _matches(scrape["spec"].get("selector", {}), service["metadata"].get("labels", {})):
                    continue
                service_ports = {p.get("name"): p.get("targetPort") for p in service["spec"].get("ports", [])}
                for endpoint in scrape["spec"].get("endpoints", []):
                    if endpoint.get("port") in service_ports and service_ports[endpoint["port"]] in ports:
                        found.append(f"{scrape['kind']}/{scrape['metadata']['name']}")
        elif scrape.get("kind") in POD_SCRAPES and _matches(scrape["spec"].get("selector", {}), labels):
            endpoints = scrape["spec"].get("podMetricsEndpoints", [])
            if any(e.get("port") in ports for e in endpoints):
                found.append(f"{scrape['kind']}/{scrape['metadata']['name']}")
    return found


def trigger_problem(trigger: dict[str, Any], target: dict[str, Any], scraped: list[str]) -> str | None:
    meta = trigger.get("metadata", {})
    if not meta.get("serverAddress"):
        return f"trigger {trigger.get('name')}: no serverAddress"
    queries = _METRIC.findall(meta.get("query", ""))
    if not queries:
        return f"trigger {trigger.get('name')}: no metric selector in query {meta.get('query')!r}"
    containers = target["spec"]["template"]["spec"].get("containers", [])
    models = {served_model(c) for c in containers}
    for metric, matchers in queries:
        wanted = dict(_MATCHER.findall(matchers))
        if metric not in VLLM_METRICS:
            return f"trigger {trigger.get('name')}: {metric} is not a vLLM metric the serving pods export"
        if wanted.get("namespace", _ns(target)) != _ns(target):
            return f"trigger {trigger.get('name')}: selects namespace {wanted['namespace']}, pods run in {_ns(target)}"
        if "model_name" in wanted and wanted["model_name"] not in models:
            served = sorted(models)
            return f"trigger {trigger.get('name')}: model_name {wanted['model_name']!r} is not served ({served})"
    if not scraped:
        null = " and ignoreNullValues makes it read 0 forever" if meta.get("ignoreNullValues") == "true" else ""
        return f"trigger {trigger.get('name')}: nothing scrapes the target's pods{null}"
    return None


def resolve(scaled: dict[str, Any], fleet: Any) -> StepResult:
    """ok when the target exists on the host and every Prometheus trigger reads a scraped vLLM metric;
    `pod` is the target's pod template (what KEDA scales)."""
    ref = scaled["spec"]["scaleTargetRef"]
    target = find_target(scaled, fleet)
    if target is None:
        return StepResult(False, f"scaleTargetRef {ref.get('kind', 'Deployment')}/{ref['name']} does not exist in "
                                 f"host namespace {_ns(scaled)} (vCluster syncs pods, not Deployments)", {})
    template = copy.deepcopy(target["spec"]["template"])
    scraped = scraped_ports(template, _ns(target), fleet)
    for trigger in scaled["spec"].get("triggers", []):
        if trigger.get("type") != "prometheus":
            continue
        problem = trigger_problem(trigger, target, scraped)
        if problem:
            return StepResult(False, problem, template)
    return StepResult(True, f"scales {target['kind']}/{target['metadata']['name']}, scraped by {', '.join(scraped)}",
                      template)


def step(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    """For a serving pod: the ScaledObject whose target's pods this is, resolved."""
    labels = host_pod.get("metadata", {}).get("labels", {})
    for scaled in (m for m in manifests_of(fleet) if m.get("kind") == "ScaledObject"
                   and _ns(m) == _ns(host_pod)):
        target = find_target(scaled, fleet)
        if target and _matches(target["spec"].get("selector", {}), labels):
            result = resolve(scaled, fleet)
            return StepResult(result.ok, result.reason, host_pod)
    return StepResult(False, "no ScaledObject scales this pod's Deployment", host_pod)
