"""Issue 16 §6: the chart's ServiceMonitor/PodMonitor (valid against the upstream CRDs) and the Grafana
dashboard in docs/ (every query names a metric /metrics really serves)."""

from __future__ import annotations

import json
import re

import pytest

from infra.schemas import SchemaRegistry
from tests.helm.chart import PRODUCTION_VALUES, containers, render
from tests.support.services import REFERENCE_DIR, REPO, need_reference

MONITORED = {**PRODUCTION_VALUES, "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}}}


def test_service_and_pod_monitors_are_valid_and_select_the_pods() -> None:
    need_reference()
    rendered = render(MONITORED)
    service_monitor = rendered.get("ServiceMonitor", "gpufleet")
    pod_monitor = rendered.get("PodMonitor", "gpufleet-worker")
    registry = SchemaRegistry(str(REFERENCE_DIR), kubernetes_version="1.33")
    assert registry.validate([service_monitor, pod_monitor]) == []
    service = rendered.get("Service", "gpufleet")
    assert service_monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service_monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    worker = rendered.get("Deployment", "gpufleet-worker")
    pod_labels = worker["spec"]["template"]["metadata"]["labels"]
    assert pod_monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    [main] = [c for c in containers(worker) if c["name"] == "worker"]
    port = {p["name"]: p["containerPort"] for p in main["ports"]}["metrics"]
    assert {"name": "GPUFLEET_WORKER_METRICS_PORT", "value": str(port)} in main["env"]
    assert service_monitor["metadata"]["labels"]["release"] == "kps"
    assert render(PRODUCTION_VALUES).of_kind("ServiceMonitor") == []


@pytest.mark.django_db
def test_dashboard_queries_only_metrics_the_platform_serves(client) -> None:
    dashboard = json.loads((REPO / "docs" / "grafana" / "gpufleet-dashboard.json").read_text())
    client.get("/login/")  # one request, so the request histogram has a sample
    served = client.get("/metrics").content.decode()
    families = set(re.findall(r"^# TYPE (\S+) ", served, re.MULTILINE))
    names = {n + suffix for n in families for suffix in ("", "_bucket", "_count", "_sum", "_total")}
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {m for expr in exprs for m in re.findall(r"\bgpufleet_[a-z_]+", expr)}
    assert used and used <= names, used - names
    needed = ("http_request", "reconcile_duration", "reconcile_failures", "fleet_sync_duration", "drift",
              "last_push_age", "billing_collection_lag", "queue_depth", "task_duration")
    assert all(any(part in m for m in used) for part in needed)


@pytest.mark.django_db
def test_metrics_are_not_served_through_the_ingress(client, settings) -> None:
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 404
    settings.GPUFLEET_METRICS_PUBLIC = True
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 200
