"""Issue 16 §4: graceful shutdown and availability of the chart's pods."""

from __future__ import annotations

import copy
import shutil

from django.conf import settings

from infra.schemas import SchemaRegistry

from .chart import PRODUCTION_VALUES, containers, render

WORKLOADS = ("gpufleet-web", "gpufleet-worker", "gpufleet-beat")


def test_web_drains_before_gunicorn_stops_and_gets_a_full_request_timeout() -> None:
    web = render(PRODUCTION_VALUES).get("Deployment", "gpufleet-web")["spec"]["template"]["spec"]
    container = containers({"spec": {"template": {"spec": web}}})[0]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and int(pre_stop[1]) >= 5
    assert shutil.which("sleep")  # the preStop command is a real binary (coreutils, in the image's base)
    timeout = int(next(a for a in container["args"] if a.startswith("--timeout=")).split("=")[1])
    assert web["terminationGracePeriodSeconds"] > int(pre_stop[1]) + timeout


def test_web_pods_are_spread_over_nodes_and_constraints_are_accepted() -> None:
    spec = render(PRODUCTION_VALUES).get("Deployment", "gpufleet-web")["spec"]["template"]
    [spread] = spec["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"].items() <= spec["metadata"]["labels"].items()
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    values = copy.deepcopy(PRODUCTION_VALUES)
    values["web"]["topologySpreadConstraints"] = [zone]
    values["worker"]["topologySpreadConstraints"] = [zone]
    rendered = render(values)
    registry = SchemaRegistry(None, kubernetes_version="1.33")
    for name in ("gpufleet-web", "gpufleet-worker"):
        obj = rendered.get("Deployment", name)
        [got] = obj["spec"]["template"]["spec"]["topologySpreadConstraints"]
        assert got["topologyKey"] == "topology.kubernetes.io/zone"
        assert got["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == name.split("-")[1]
        assert registry.validate([obj]) == []


def test_kubernetes_backend_workers_share_no_read_write_once_claim() -> None:
    rendered = render({"config": {"backend": "kubernetes"}, "rbac": {"create": True}, "worker": {"replicas": 3}})
    assert rendered.of_kind("PersistentVolumeClaim") == []
    worker = rendered.get("Deployment", "gpufleet-worker")["spec"]["template"]["spec"]
    assert all("persistentVolumeClaim" not in v for v in worker["volumes"])
    assert [c["name"] for c in worker["containers"]] == ["worker"]


def test_bumping_the_secret_version_rolls_every_pod() -> None:
    def annotations(values: dict) -> dict[str, str]:
        rendered = render(values)
        return {n: rendered.get("Deployment", n)["spec"]["template"]["metadata"]["annotations"]["checksum/secret"]
                for n in WORKLOADS}

    before = annotations(PRODUCTION_VALUES)
    rotated = copy.deepcopy(PRODUCTION_VALUES)
    rotated["secrets"]["version"] = "2026-12-01"
    after = annotations(rotated)
    assert all(before[n] != after[n] for n in WORKLOADS)
    assert annotations(PRODUCTION_VALUES) == before  # stable otherwise: no roll on every upgrade


def test_celery_tasks_have_time_limits() -> None:
    assert 0 < settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
