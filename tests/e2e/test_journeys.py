"""The pod journeys (tests/journey) on a real cluster: what the models there only assume.

Needs a disposable cluster with the prerequisites installed as docs/scheduling.md lists them (Kueue
v0.19.2 with manageJobsWithoutQueueName false, KAI v0.13.0, HAMi v2.10.0, Kyverno v1.19.0) and
GPUFLEET_E2E_KUBECONFIG set; skips by design without it (tests/e2e/conftest.py).

For every trust level x GPU mode x workload kind the host pod is created with `dryRun=All`: the API
server runs the whole admission chain for real (LimitRanger, the mutating webhooks in their real order
and with their real reinvocation, Pod Security, Kyverno validation, ResourceQuota) and returns the pod it
would store. That pod -- or the refusal -- must match the model's (runner.STEPS up to `resource-quota`).
This is where the webhook-order prerequisite (tests/journey/runner.py) is proven or disproven.
"""

from __future__ import annotations

import pytest

from infra.errors import PermanentError
from infra.kube.backend import KubernetesBackend
from tests.journey import runner, workloads
from tests.journey.fleet import PATCHED_SYNCER, TRUST, render_fleet
from tests.journey.steps import vcluster_sync

ADMISSION = runner.STEPS[: [n for n, _ in runner.STEPS].index("resource-quota") + 1]
APPLIED_KINDS = {"Namespace", "ResourceQuota", "LimitRange", "Policy", "LocalQueue", "ClusterQueue", "Queue",
                 "ResourceFlavor", "Cohort", "WorkloadPriorityClass"}
CASES = [(slug, mode, kind) for slug in TRUST for mode in ("whole", "mig", "hami")
         for kind in ("training", "inference", "system") if kind != "system" or mode == "whole"]


def _limits(pod: dict) -> dict[str, str]:
    return {k: str(v) for k, v in (pod["spec"]["containers"][0]["resources"].get("limits") or {}).items()}


def _need_crds(backend: KubernetesBackend) -> None:
    for path in ("/apis/kueue.x-k8s.io/v1beta2", "/apis/scheduling.run.ai/v2", "/apis/kyverno.io/v1"):
        try:
            backend._call("GET", path)
        except PermanentError:
            pytest.skip(f"e2e journeys: {path} is not served; install the prerequisites (docs/scheduling.md)")


@pytest.mark.parametrize(("slug", "mode", "kind"), CASES)
def test_admission_on_the_cluster_matches_the_model(e2e_backend: KubernetesBackend, e2e_owner: str,
                                                    slug: str, mode: str, kind: str) -> None:
    _need_crds(e2e_backend)
    name = f"{e2e_owner}-{slug}"
    fleet = render_fleet(names={slug: name}, vcluster_syncer_image=PATCHED_SYNCER)
    ours = [m for m in [*fleet.platform, *fleet.tenants[slug]] if m["kind"] in APPLIED_KINDS]
    e2e_backend.apply(f"tenant:{e2e_owner}", ours)
    virtual = (workloads.system_pod() if kind == "system" else
               workloads.training_pod(mode) if kind == "training" else workloads.inference_pod(mode))
    host = vcluster_sync.translate(virtual, f"tenant-{name}", fleet)
    model = runner.run_host(host, fleet, steps=ADMISSION)
    try:
        real = e2e_backend._call("POST", f"/api/v1/namespaces/tenant-{name}/pods",
                                 query=[("dryRun", "All")], body=host)
    except PermanentError as refused:
        assert model.refusal is not None, f"the cluster refused what the model admits: {refused}\n{model}"
        assert model.refusal[1].split(": ")[-1] in str(refused)
        return
    assert model.refusal is None, f"the cluster admitted what the model refuses:\n{model}"
    expected = model.pod
    assert real["spec"].get("schedulerName") == expected["spec"]["schedulerName"]
    assert sorted(g["name"] for g in real["spec"].get("schedulingGates") or []) == sorted(
        g["name"] for g in expected["spec"].get("schedulingGates", []))
    for label in ("kueue.x-k8s.io/queue-name", "kai.scheduler/queue"):
        assert real["metadata"].get("labels", {}).get(label) == expected["metadata"]["labels"].get(label)
    assert _limits(real) == _limits(expected)
