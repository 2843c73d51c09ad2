"""A pod's journey from the tenant's virtual cluster to the scheduler that binds it on the host.

Order (kube-apiserver v1.33 admission, pkg/kubeapiserver/options/plugins.go AllOrderedPlugins: mutating
plugins first -- LimitRanger, then MutatingAdmissionWebhook -- then validating plugins -- PodSecurity,
ValidatingAdmissionWebhook, ResourceQuota last):

  vCluster syncer translate + API defaulting -> LimitRanger -> mutating webhooks (Kyverno mutate, Kueue
  pod webhook, HAMi) -> Pod Security -> Kyverno validate -> ResourceQuota -> (pod exists) vCluster
  resync -> Kueue admission -> KAI queue limits -> scheduler -> [which NodePool could create its node]

The mutating webhooks are modelled in the order whose result the platform relies on: Kyverno's labels
and schedulerName are seen by Kueue's and HAMi's webhooks. The API server calls webhook configurations
sorted by name and re-calls earlier ones with `reinvocationPolicy: IfNeeded` after a later one changed
the pod; `hami-…` and `kueue-…` sort before `kyverno-…`, so this order is a prerequisite of the
installation (docs/scheduling.md, "Admission order"), proven only on a real cluster (tests/e2e).

Every step has the signature `(host_pod, fleet) -> StepResult`; a refusal stops the journey.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .steps import (
    Step,
    StepResult,
    hami,
    kai,
    karpenter,
    kueue,
    kyverno,
    limitrange,
    pss,
    quota,
    scheduler,
    vcluster_sync,
)

MUTATING_WEBHOOKS: list[tuple[str, Step]] = [
    ("kyverno-mutate", kyverno.mutate),
    ("kueue-webhook", kueue.webhook),
    ("hami-webhook", hami.webhook),
]
STEPS: list[tuple[str, Step]] = [
    ("limit-ranger", limitrange.admit),
    *MUTATING_WEBHOOKS,
    ("pod-security", pss.admit),
    ("kyverno-validate", kyverno.validate),
    ("resource-quota", quota.admit),
    ("vcluster-resync", vcluster_sync.resync),
    ("kueue-admission", kueue.admit),
    ("kai-queue", kai.admit),
    ("scheduler", scheduler.bind),
]

# "Which NodePool could create its node": asked of a pod the scheduler would leave pending for want of a
# node, so it is not one of the admission STEPS (a non-GPU system pod lands on existing nodes).
NODE_POOL_STEP: Step = karpenter.step


@dataclass(frozen=True)
class Journey:
    trace: list[tuple[str, StepResult]]

    @property
    def ok(self) -> bool:
        return all(result.ok for _, result in self.trace)

    @property
    def pod(self) -> dict[str, Any]:
        return self.trace[-1][1].pod

    @property
    def refusal(self) -> tuple[str, str] | None:
        return next(((name, r.reason) for name, r in self.trace if not r.ok), None)

    def step(self, name: str) -> StepResult:
        return next(r for n, r in self.trace if n == name)

    def __str__(self) -> str:
        return "\n".join(f"{'ok ' if r.ok else 'NO '} {n}: {r.reason}" for n, r in self.trace)


def run_host(host_pod: dict[str, Any], fleet: Any, steps: list[tuple[str, Step]] | None = None) -> Journey:
    trace: list[tuple[str, StepResult]] = []
    pod = host_pod
    for name, step in steps or STEPS:
        result = step(pod, fleet)
        trace.append((name, result))
        if not result.ok:
            break
        pod = result.pod
    return Journey(trace)


def run(virtual_pod: dict[str, Any], host_namespace: str, fleet: Any) -> Journey:
    """A pod the tenant creates inside its virtual cluster."""
    host = vcluster_sync.translate(virtual_pod, host_namespace, fleet)
    journey = run_host(host, fleet)
    return Journey([("vcluster-sync", StepResult(True, f"synced as {host['metadata']['name']}", host)),
                    *journey.trace])
