"""Issue 11 §3: GPU node health from DCGM traces in a real VictoriaMetrics, remediation on the Kubernetes
emulator (nodes, pods, PDBs, the Eviction subresource, NodeClaims), with the safety limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from gpufleet.audit.models import AuditEvent
from infra.kube.nodes import ClusterOps
from infra.metrics import MetricsClient
from scheduling.nodehealth import kube as nodehealth_kube
from scheduling.nodehealth.actions import set_policy, set_rule
from scheduling.nodehealth.models import Phase, Remediation, RemediationStep
from scheduling.nodehealth.remediation import assess, remediate
from tests.support.victoriametrics import VictoriaMetrics

from .conftest import create, get

pytestmark = pytest.mark.django_db

STEP = 30  # seconds between scrapes
# The instant assessed: real time (VictoriaMetrics keeps the real clock), minute-aligned, a little back.
T = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
MIN = 60


def _series(name: str, node: str, gpu: str, values: Any) -> Iterator[str]:
    """One GPU's series from T-3h to T, every 30 s; `values(seconds_before_T)` gives each value."""
    start = int(T.timestamp()) - 3 * 3600
    labels = f'gpu="{gpu}",UUID="GPU-{node}-{gpu}",modelName="NVIDIA H100 80GB HBM3",Hostname="{node}"'
    for t in range(start, int(T.timestamp()) + 1, STEP):
        yield f"{name}{{{labels}}} {values(int(T.timestamp()) - t)} {t * 1000}"


def _steps(*changes: tuple[int, int], before: int = 0):  # type: ignore[no-untyped-def]
    """A value that becomes v at `ago` seconds before T (changes sorted oldest first)."""
    def value(ago: int) -> int:
        current = before
        for at_ago, v in changes:
            if ago <= at_ago:
                current = v
        return current
    return value


@pytest.fixture(scope="session")
def traces(victoria: VictoriaMetrics) -> VictoriaMetrics:
    lines: list[str] = []
    zero = _steps()
    for node in ("gpu-a", "gpu-b", "gpu-c", "gpu-d"):
        for gpu in ("0", "3"):
            for metric in ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                           "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_THERMAL_VIOLATION"):
                if (node, gpu, metric) in {("gpu-b", "0", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
                                           ("gpu-c", "0", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
                                           ("gpu-d", "0", "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
                                           ("gpu-d", "0", "DCGM_FI_DEV_THERMAL_VIOLATION")}:
                    continue
                lines += _series(metric, node, gpu, zero)
            if (node, gpu) not in {("gpu-a", "3"), ("gpu-c", "0")}:
                lines += _series("DCGM_FI_DEV_XID_ERRORS", node, gpu, zero)
    # gpu-a, GPU 3: XID 79 (fell off the bus), an application XID 13, then 79 again -> 79 twice: replace.
    lines += _series("DCGM_FI_DEV_XID_ERRORS", "gpu-a", "3", _steps((40 * MIN, 79), (30 * MIN, 13), (20 * MIN, 79)))
    # gpu-b, GPU 0: two volatile double-bit ECC errors 15 minutes ago: drain.
    lines += _series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu-b", "0", _steps((15 * MIN, 2)))
    # gpu-c, GPU 0: XID 48 three hours ago is still "the last XID" (the baseline, not new), then one
    # application XID 13 (below its threshold of 3) and 50 PCIe replays (below 100): healthy.
    lines += _series("DCGM_FI_DEV_XID_ERRORS", "gpu-c", "0", _steps((3 * 3600, 48), (5 * MIN, 13)))
    lines += _series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "gpu-c", "0",
                     lambda ago: 1000 + (50 if ago <= 30 * MIN else 0))
    # gpu-d, GPU 0: row remapping failed (RMA candidate: replace), throttled 20 % of the hour (watch).
    lines += _series("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu-d", "0", _steps((50 * MIN, 1)))
    lines += _series("DCGM_FI_DEV_THERMAL_VIOLATION", "gpu-d", "0",
                     lambda ago: 5 * 10**12 + max(0, 60 * MIN - ago) * 10**9 // 5)
    victoria.import_prometheus(lines)
    return victoria


def _node(name: str, flavor: str, *, gpus: int = 8, allocatable: int | None = None,
          karpenter: bool = True, conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    labels = {"gpufleet.io/flavor": flavor, "kubernetes.io/hostname": name}
    if karpenter:
        labels["karpenter.sh/nodepool"] = f"{flavor}-pool"
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus), "cpu": "192"},
                       "allocatable": {"nvidia.com/gpu": str(gpus if allocatable is None else allocatable)},
                       "conditions": [ready, *(conditions or [])]}}


def _pod(namespace: str, name: str, node: str, labels: dict[str, str], *, phase: str = "Running",
         owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "owner", "uid": "u-1"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": phase}}


def _pdb(namespace: str, name: str, app: str, min_available: int) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}}


@pytest.fixture
def fleet(kube, kube_backend, traces, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ClusterOps, MetricsClient]]:
    url = kube.url
    for node in (_node("gpu-a", "h100"), _node("gpu-b", "h100"), _node("gpu-c", "h100"),
                 _node("gpu-d", "a100", karpenter=False)):
        create(url, "/api/v1/nodes", node)
    create(url, "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1"},
                                  "status": {"capacity": {"cpu": "64"}}})
    for node in ("gpu-a", "gpu-b", "gpu-c"):
        create(url, "/apis/karpenter.sh/v1/nodeclaims", {
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": f"nc-{node[-1]}"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                     "requirements": []},
            "status": {"nodeName": node}})
    pods = [
        _pod("team-a", "train-0", "gpu-a", {"app": "train"}),
        _pod("team-a", "train-1", "gpu-c", {"app": "train"}),
        _pod("team-b", "solo-0", "gpu-a", {"app": "solo"}),
        _pod("kube-system", "dcgm-exporter-x", "gpu-a", {"app": "dcgm"}, owner="DaemonSet"),
        _pod("team-a", "done-0", "gpu-a", {"app": "batch"}, phase="Succeeded"),
    ]
    for pod in pods:
        create(url, f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)
    create(url, "/apis/policy/v1/namespaces/team-a/poddisruptionbudgets", _pdb("team-a", "train", "train", 1))
    create(url, "/apis/policy/v1/namespaces/team-b/poddisruptionbudgets", _pdb("team-b", "solo", "solo", 1))
    ops, metrics = ClusterOps(kube_backend), MetricsClient(traces.url)
    monkeypatch.setattr(nodehealth_kube, "cluster_ops", lambda: ops)
    monkeypatch.setattr(nodehealth_kube, "metrics_client", lambda: metrics)
    yield ops, metrics


def _by_node(report: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["node"]: row for row in report}


def test_states_from_the_health_traces(fleet) -> None:
    ops, metrics = fleet
    report = _by_node(assess(T, ops=ops, metrics=metrics).report())
    assert sorted(report) == ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]  # the CPU node is not a GPU node
    assert {n: r["state"] for n, r in report.items()} == {
        "gpu-a": "replace", "gpu-b": "drain", "gpu-c": "healthy", "gpu-d": "replace"}
    [xid] = report["gpu-a"]["evidence"]
    assert (xid["signal"], xid["match"], xid["gpu"], xid["value"]) == ("xid", "79", "3", "2")
    # The evidence is the samples where the code appeared, exactly.
    assert [s[1] for s in xid["evidence"]["samples"]] == ["79", "79"]
    assert xid["evidence"]["samples"][0][0] == (T - timedelta(minutes=40)).isoformat().replace("+00:00", "Z")
    assert report["gpu-a"]["reasons"][0].startswith("XID 79 x2 on GPU 3 in the window (>= 2 -> replace)")
    [dbe] = report["gpu-b"]["evidence"]
    assert (dbe["signal"], dbe["value"]) == ("ecc_dbe_volatile", "2")
    assert dbe["evidence"]["samples"][-1][1] == "2"
    assert report["gpu-c"]["reasons"] == []  # old XID 48 not new; XID 13 x1 and 50 replays below thresholds
    states = [(e["signal"], e["state"], e["value"]) for e in report["gpu-d"]["evidence"]]
    assert states == [("row_remap_failure", "replace", "1"), ("thermal_violation", "watch", "20")]


def test_thresholds_are_data_the_admin_tunes(fleet) -> None:
    ops, metrics = fleet
    set_rule(signal="pcie_replays", match="", state="watch", threshold="50")
    set_rule(signal="xid", match="13", state="cordon", threshold="1", description="we distrust XID 13")
    report = _by_node(assess(T, ops=ops, metrics=metrics).report())
    assert report["gpu-c"]["state"] == "cordon"
    assert [(e["signal"], e["match"], e["state"]) for e in report["gpu-c"]["evidence"]] == [
        ("xid", "13", "cordon"), ("pcie_replays", "", "watch")]
    assert AuditEvent.objects.filter(action="nodehealth.rule_set").count() == 2


def test_node_conditions_and_withdrawn_gpus(fleet, kube) -> None:
    ops, metrics = fleet
    create(kube.url, "/api/v1/nodes", _node("gpu-e", "h100", conditions=[
        {"type": "GpuMemWatch", "status": "True", "reason": "GpuMemWatchIsNotHealthy",
         "message": "ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED GPU:2 Recommended Action=RESET_GPU;"}]))
    create(kube.url, "/api/v1/nodes", _node("gpu-f", "h100", allocatable=7, conditions=[
        {"type": "GpuPcieWatch", "status": "False", "reason": "GpuPcieWatchIsHealthy", "message": ""}]))
    report = _by_node(assess(T, ops=ops, metrics=metrics).report())
    assert report["gpu-e"]["state"] == "drain"
    assert report["gpu-e"]["evidence"][0]["evidence"]["message"].startswith("ErrorCode:DCGM_FR_VOLATILE_DBE")
    assert report["gpu-f"]["state"] == "cordon"  # the device plugin withdrew one GPU; a False condition is no signal
    assert report["gpu-f"]["reasons"] == [
        "unhealthy gpus 1 (>= 1 -> cordon): the device plugin withdrew GPUs from allocatable"]


def test_dry_run_is_the_default_and_the_limits_hold(fleet) -> None:
    ops, metrics = fleet
    assessment = assess(T, ops=ops, metrics=metrics)
    assert assessment.limits.dry_run and assessment.limits.max_nodes == 1
    actions = {n: r["action"] for n, r in _by_node(assessment.report()).items()}
    assert actions == {
        "gpu-a": "dry-run, would cordon, then drain (evict pods), then delete NodeClaim nc-a",
        "gpu-b": "blocked: at most 1 node(s) in remediation at once (now: gpu-a)",
        "gpu-c": "none",
        "gpu-d": "blocked: at most 1 node(s) in remediation at once (now: gpu-a)",
    }
    remediate(assessment, ops)
    # Nothing touched the cluster: no cordon, every pod still there.
    assert not any((get(ops.backend.api.configuration.host, f"/api/v1/nodes/{n}") or {})["spec"].get("unschedulable")
                   for n in ("gpu-a", "gpu-b", "gpu-c", "gpu-d"))
    assert len(ops.pods_on("gpu-a")) == 4
    rem = Remediation.objects.get(node="gpu-a")
    assert (rem.dry_run, rem.phase, rem.target_state) == (True, Phase.PLANNED, "replace")
    steps = list(rem.steps.values_list("action", "outcome"))
    assert steps == [("plan", "dry-run"), ("cordon", "dry-run"), ("drain", "dry-run"), ("delete-nodeclaim", "dry-run")]
    assert rem.steps.first().evidence[0]["evidence"]["samples"]  # the samples that triggered it
    assert AuditEvent.objects.filter(action__startswith="nodehealth.", object_id=str(rem.pk)).count() == 4
    # A second pass records nothing new (level-triggered, not one row per pass).
    remediate(assess(T, ops=ops, metrics=metrics), ops)
    assert rem.steps.count() == 4


def test_percent_of_a_flavor_and_never_the_last_schedulable_node(fleet) -> None:
    ops, metrics = fleet
    set_policy(max_nodes=5, max_percent="34")
    actions = {n: r["action"] for n, r in _by_node(assess(T, ops=ops, metrics=metrics).report()).items()}
    # h100 has 3 nodes: 34 % is one node at a time. a100 has one node: never its last schedulable one.
    assert actions["gpu-a"].startswith("dry-run, would cordon")
    assert actions["gpu-b"] == ("blocked: at most 1 of the 3 node(s) of flavor h100 (34.00 %) in remediation at "
                                "once (now: gpu-a)")
    assert actions["gpu-d"] == "blocked: gpu-d is the last schedulable node of flavor a100"
    set_policy(max_percent="100")
    actions = {n: r["action"] for n, r in _by_node(assess(T, ops=ops, metrics=metrics).report()).items()}
    assert actions["gpu-b"] == "dry-run, would cordon, then drain (evict pods)"


def test_live_remediation_cordons_evicts_through_pdbs_and_replaces_the_nodeclaim(fleet, kube) -> None:
    ops, metrics = fleet
    set_policy(dry_run=False, max_nodes=2, max_percent="100")
    remediate(assess(T, ops=ops, metrics=metrics), ops)
    node_a = get(kube.url, "/api/v1/nodes/gpu-a")
    assert node_a["spec"]["unschedulable"] is True
    left = sorted(p["metadata"]["name"] for p in ops.pods_on("gpu-a"))
    # train-0 evicted (its PDB allows one disruption); solo-0's PDB refuses; DaemonSet and finished pods stay.
    assert left == ["dcgm-exporter-x", "done-0", "solo-0"]
    rem = Remediation.objects.get(node="gpu-a", finished__isnull=True)
    assert rem.phase == Phase.DRAINING and not rem.dry_run
    blocked = rem.steps.get(action="evict", target="team-b/solo-0")
    assert blocked.outcome == "blocked"
    assert "Cannot evict pod as it would violate the pod's disruption budget." in blocked.detail
    assert get(kube.url, "/apis/karpenter.sh/v1/nodeclaims/nc-a") is not None  # not before the drain ends
    # gpu-b (drain) is the second node allowed: cordoned and drained (nothing to evict), NodeClaim kept.
    rem_b = Remediation.objects.get(node="gpu-b", finished__isnull=True)
    assert rem_b.phase == Phase.DRAINED
    assert get(kube.url, "/apis/karpenter.sh/v1/nodeclaims/nc-b") is not None
    # gpu-d stays blocked: the last schedulable a100 node.
    assert not Remediation.objects.filter(node="gpu-d").exists()

    # The second pass retries solo-0 (still refused: recorded once), then the owner scales out.
    remediate(assess(T, ops=ops, metrics=metrics), ops)
    assert rem.steps.filter(action="evict", target="team-b/solo-0").count() == 1
    create(kube.url, "/api/v1/namespaces/team-b/pods", _pod("team-b", "solo-1", "gpu-c", {"app": "solo"}))
    remediate(assess(T, ops=ops, metrics=metrics), ops)
    rem.refresh_from_db()
    assert rem.phase == Phase.REPLACING and rem.nodeclaim == "nc-a"
    assert get(kube.url, "/apis/karpenter.sh/v1/nodeclaims/nc-a") is None
    assert sorted(p["metadata"]["name"] for p in ops.pods_on("gpu-a")) == ["dcgm-exporter-x", "done-0"]
    actions = list(rem.steps.values_list("action", "outcome"))
    assert actions[:2] == [("plan", "done"), ("cordon", "done")]
    assert actions[-3:] == [("evict", "done"), ("drained", "done"), ("delete-nodeclaim", "done")]
    # Pods were only ever evicted: no DELETE reached a pod.
    deletes = [str(r.url.path) for r in kube.emulator._requests if str(r.method).endswith("DELETE")]
    assert deletes == ["/apis/karpenter.sh/v1/nodeclaims/nc-a"]
    events = AuditEvent.objects.filter(action="nodehealth.delete-nodeclaim")
    assert events.count() == 1 and events.get().after["evidence"][0]["match"] == "79"


def test_uncordon_is_a_human_action(fleet, kube) -> None:
    ops, metrics = fleet
    set_policy(dry_run=False, max_nodes=2, max_percent="100")
    remediate(assess(T, ops=ops, metrics=metrics), ops)  # gpu-a (still draining: solo-0) and gpu-b (drained)
    later = T + timedelta(hours=3)  # the window holds no errors any more: healthy again
    assessment = assess(later, ops=ops, metrics=metrics)
    rows = _by_node(assessment.report())
    assert rows["gpu-a"]["state"] == rows["gpu-b"]["state"] == "healthy"
    # A drain that started goes on; a finished one holds the node cordoned. Neither uncordons by itself.
    assert rows["gpu-a"]["action"] == "continue: drain (evict pods), then delete NodeClaim nc-a"
    assert rows["gpu-b"]["action"] == "hold: stays cordoned until a person uncordons it (gpufleet fleet uncordon)"
    remediate(assessment, ops)
    assert get(kube.url, "/api/v1/nodes/gpu-b")["spec"]["unschedulable"] is True
    out = StringIO()
    call_command("fleet", "uncordon", "gpu-b", "--note", "GPU reset done", stdout=out)
    assert json.loads(out.getvalue())["closed_because"] == "uncordoned by a person: GPU reset done"
    assert get(kube.url, "/api/v1/nodes/gpu-b")["spec"]["unschedulable"] is False
    assert not Remediation.objects.filter(node="gpu-b", finished__isnull=True).exists()
    assert RemediationStep.objects.filter(action="uncordon", target="gpu-b").count() == 1
    assert AuditEvent.objects.filter(action="nodehealth.uncordon").get().actor_label
    assert _by_node(assess(later, ops=ops, metrics=metrics).report())["gpu-b"]["action"] == "none"


def test_cli_contract(fleet) -> None:
    out = StringIO()
    call_command("fleet", "health", "--at", T.isoformat().replace("+00:00", "Z"), "--json", stdout=out)
    rows = json.loads(out.getvalue())
    assert [r["node"] for r in rows] == ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
    for row in rows:
        assert {"node", "state", "reasons", "action"} <= set(row)
        assert isinstance(row["reasons"], list)
    assert rows[0]["state"] == "replace" and rows[0]["action"].startswith("dry-run, would cordon")


def test_periodic_pass_records_the_dry_run_plan(fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufleet import clock
    from scheduling.nodehealth.tasks import remediate_fleet

    monkeypatch.setattr(clock, "now", lambda: T)
    assert remediate_fleet() == 4  # plan + the three would-be steps of gpu-a
    assert remediate_fleet() == 0  # nothing new: level-triggered
    assert Remediation.objects.get().node == "gpu-a"


def test_api_and_portal_are_for_platform_admins(fleet, kube, api, admin_api) -> None:
    from django.test import Client

    from tests.support import factories

    at = T.isoformat().replace("+00:00", "Z")
    rows = admin_api.get(f"/api/v1/node-health/?at={at}").json()
    assert [(r["node"], r["state"]) for r in rows] == [("gpu-a", "replace"), ("gpu-b", "drain"),
                                                        ("gpu-c", "healthy"), ("gpu-d", "replace")]
    bad = admin_api.get("/api/v1/node-health/?at=yesterday")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "at"
    member = factories.user("member")
    api.force_authenticate(member)
    assert api.get("/api/v1/node-health/").status_code == 403
    assert api.post("/api/v1/node-health/gpu-a/uncordon/", {}, format="json").status_code == 403
    assert get(kube.url, "/api/v1/nodes/gpu-a")["spec"].get("unschedulable") is not False
    done = admin_api.post("/api/v1/node-health/gpu-a/uncordon/", {"note": "checked"}, format="json")
    assert done.status_code == 200 and done.json()["closed_because"] == "uncordoned by a person: checked"
    assert admin_api.post("/api/v1/node-health/nope/uncordon/", {}, format="json").status_code == 404
    client = Client()
    client.force_login(member)
    assert client.get("/gpu/node-health/").status_code == 403
    client.force_login(factories.user("root", roles={"platform-admin"}))
    page = client.get("/gpu/node-health/")
    assert page.status_code == 200
    assert b'data-testid="node-health-summary"' in page.content and b"gpu-a" in page.content


def test_cli_table_for_people(fleet) -> None:
    out = StringIO()
    call_command("fleet", "health", "--at", T.isoformat(), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["NODE", "STATE", "ACTION"]
    assert lines[1].split()[:3] == ["gpu-a", "replace", "dry-run,"]
    assert lines[2].strip().startswith("- XID 79 x2 on GPU 3")
