"""Whether a tenant's vCluster syncer keeps the scheduling gates Kueue puts on host pods (issue 26, B3). Pure,
except `gpu_workloads_condition`, which reads the settings at the edge.

What upstream does at the pinned tags:
* Kueue v0.19.2's pod webhook gives every managed pod the finalizer `kueue.x-k8s.io/managed` and the gates
  `kueue.x-k8s.io/admission` and (TopologyAwareScheduling on) `kueue.x-k8s.io/topology`
  (kubernetes-sigs/kueue@v0.19.2:pkg/controller/jobs/pod/pod_webhook.go:170-186).
* vCluster v0.36.1's syncer sets the host pod's `spec.schedulingGates` to the virtual pod's on every sync
  (loft-sh/vcluster@v0.36.1:pkg/controllers/resources/pods/translate/diff.go:163, `calcSpecDiff`), so those
  gates are gone at the first resync. The fix (commit 3a272b45a, "preserve externally injected scheduling
  gates") is in no release tag.
* Kueue then sees a pod that is no longer suspended (`podSuspended`: terminated or gated,
  pod_controller.go:234-236) whose Workload is not admitted, and stops it
  (pkg/controller/jobframework/reconciler.go:653-662): a `TerminationTarget` condition and a DELETE
  (pod_controller.go:513-552). Every GPU pod of the tenant is deleted, and one the kube-scheduler bound in
  between ran outside quota.

The platform cannot fix the syncer, so it refuses GPU pods for a vCluster release known to strip the gates
unless a syncer image that keeps them is configured (GPUFLEET_VCLUSTER_SYNCER_IMAGE): a Kyverno rule in the
tenant namespace denies them with the reason (scheduling.routing.syncer_gate_policy), the tenant carries the
condition below, and `gpufleet doctor` fails (scheduling.doctor.check_vcluster_syncers). docs/compatibility.md, B3.
"""

from __future__ import annotations

from typing import Any

from gpufleet import clock
from gpufleet.core import conf

# The first vCluster release whose syncer keeps host-side gates; None while no release carries the fix
# (true up to v0.36.1, the pinned tag). Set it when one does, with the tag read.
FIXED_RELEASE: tuple[int, ...] | None = None
CONDITION = "GpuWorkloads"
REASON_STRIPPED = "VClusterStripsSchedulingGates"
REASON_OK = "SyncerKeepsSchedulingGates"
DOC = "docs/compatibility.md, B3"


def version_tuple(version: str) -> tuple[int, ...]:
    """"0.36.1" / "v0.36.1-rc.1" -> (0, 36, 1): the numeric release, pre-release suffix dropped."""
    core = version.strip().lstrip("v").split("-", 1)[0].split("+", 1)[0]
    return tuple(int(part) for part in core.split(".") if part.isdigit())


def keeps_host_gates(chart_version: str, syncer_image: str) -> bool:
    """A configured syncer image is the operator's statement that it carries the fix (a build of the pinned
    release plus commit 3a272b45a); otherwise only a release at or after FIXED_RELEASE keeps the gates."""
    if syncer_image.strip():
        return True
    return FIXED_RELEASE is not None and version_tuple(chart_version) >= FIXED_RELEASE


def tenant_message(chart_version: str) -> str:
    """What a tenant sees when its GPU pod is refused (the Kyverno rule's message)."""
    return (f"GPU pods are refused: this platform's vCluster {chart_version} syncer removes Kueue's scheduling "
            "gates from host pods, and Kueue would delete the pod (or it would run outside quota); the platform "
            "admins must configure a syncer that keeps them (GPUFLEET_VCLUSTER_SYNCER_IMAGE, " + DOC + ")")


def problem(chart_version: str, syncer_image: str) -> str:
    """"" when GPU pods are safe; otherwise what is wrong and what to do (operator wording)."""
    if keeps_host_gates(chart_version, syncer_image):
        return ""
    return (f"vCluster {chart_version}'s stock syncer copies the virtual pod's schedulingGates over the host pod's "
            "(loft-sh/vcluster@v0.36.1 pkg/controllers/resources/pods/translate/diff.go:163; the fix is in no "
            "release), so Kueue stops and deletes every unadmitted GPU pod; GPU pods are refused until "
            "GPUFLEET_VCLUSTER_SYNCER_IMAGE names a syncer built with loft-sh/vcluster commit 3a272b45a (" + DOC + ")")


def condition(chart_version: str, syncer_image: str, now: str) -> dict[str, str]:
    found = problem(chart_version, syncer_image)
    if found:
        return {"type": CONDITION, "status": "False", "reason": REASON_STRIPPED, "message": found,
                "lastTransitionTime": now}
    image = syncer_image.strip() or f"the chart's {chart_version} image"
    return {"type": CONDITION, "status": "True", "reason": REASON_OK,
            "message": f"the vCluster syncer ({image}) keeps Kueue's scheduling gates", "lastTransitionTime": now}


def gpu_workloads_condition(tenant: Any) -> dict[str, str]:
    """The per-tenant condition: the same for every tenant (a platform setting)."""
    return condition(conf.VCLUSTER_CHART_VERSION,
                     conf.VCLUSTER_SYNCER_IMAGE or "", clock.now().isoformat())


def gpu_workloads_conditions_many(tenants: list[Any]) -> dict[int, dict[str, str]]:
    """The batch version for fleet passes: no query at all."""
    if not tenants:
        return {}
    one = gpu_workloads_condition(tenants[0])
    return {t.pk: dict(one) for t in tenants}
