"""Assess the fleet (cluster + TSDB -> states -> plan) and carry a plan out, every step audited.

`assess(at)` is read-only: it is what `gpufleet fleet health` prints. `remediate(assessment)` acts on it:
cordon (Node spec.unschedulable), drain (the Eviction API, so PodDisruptionBudgets hold; a refused
eviction is recorded and retried on the next pass, pods are never deleted directly), then for a
Karpenter node in state `replace` delete its NodeClaim once drained. In dry-run every step is recorded
as what it would have done and nothing is written to the cluster. Each step is a RemediationStep with
its evidence (the readings that triggered it) and an AuditEvent. Running a pass twice is harmless:
steps already done are not repeated (level-triggered, like the reconcile).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from gpufleet import clock
from gpufleet.audit.record import record
from infra.errors import PermanentError, TransientError
from infra.kube.nodes import ClusterOps
from infra.metrics import MetricsClient
from scheduling.nodepools.render import FLAVOR_LABEL

from .classify import Classification, classify
from .inventory import GpuNode, parse_nodes
from .models import SEVERITY, Phase, Remediation, RemediationPolicy, RemediationStep
from .planning import CORDON, DELETE_NODECLAIM, DRAIN, HOLD, Decision, Limits, OpenRemediation, plan
from .rules import active_rules
from .signals import HealthSignals

DAEMONSET_OWNER = "DaemonSet"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass
class Assessment:
    at: datetime
    limits: Limits
    nodes: list[GpuNode]
    classifications: dict[str, Classification]
    decisions: list[Decision]

    def report(self) -> list[dict[str, Any]]:
        """One object per GPU node: the CLI's and the API's answer."""
        out = []
        for decision in self.decisions:
            cls = self.classifications.get(decision.node)
            out.append({"node": decision.node, "flavor": decision.flavor, "state": decision.state,
                        "reasons": cls.reason_texts if cls else [], "action": decision.action,
                        "dry_run": decision.dry_run, "evidence": cls.evidence if cls else []})
        return out

    def summary(self) -> dict[str, int]:
        counts = {state: 0 for state in SEVERITY}
        for decision in self.decisions:
            counts[decision.state] = counts.get(decision.state, 0) + 1
        return counts


def limits_of(policy: RemediationPolicy) -> Limits:
    return Limits(max_nodes=policy.max_nodes, max_percent=policy.max_percent, dry_run=policy.dry_run)


def open_remediations() -> list[OpenRemediation]:
    return [OpenRemediation(r.node, r.flavor, r.target_state, r.phase, r.dry_run)
            for r in Remediation.objects.filter(finished__isnull=True)]


def assess(at: datetime | None, *, ops: ClusterOps, metrics: MetricsClient) -> Assessment:
    at = at or clock.now()
    policy = RemediationPolicy.current()
    nodes = parse_nodes(ops.nodes(), ops.nodeclaims())
    signals = HealthSignals(metrics, window=timedelta(minutes=policy.window_minutes))
    readings = [*signals.readings(at), *(r for node in nodes for r in node.readings())]
    rules = active_rules()
    classifications = {node.name: classify(node.name, readings, rules) for node in nodes}
    limits = limits_of(policy)
    return Assessment(at, limits, nodes, classifications, plan(nodes, classifications, open_remediations(), limits))


# --- carrying a plan out ----------------------------------------------------------------------------


def _step(rem: Remediation, at: datetime, action: str, outcome: str, *, target: str = "", detail: str = "",
          evidence: list[dict[str, Any]] | None = None) -> RemediationStep:
    step = RemediationStep.objects.create(remediation=rem, at=at, action=action, target=target, outcome=outcome,
                                          detail=detail[:1000], evidence=evidence or [])
    record(f"nodehealth.{action}", rem, after={"node": rem.node, "action": action, "target": target,
                                               "outcome": outcome, "detail": step.detail, "dry_run": rem.dry_run,
                                               "evidence": step.evidence})
    return step


def evictable(pod: dict[str, Any]) -> bool:
    """What a drain evicts: not DaemonSet pods (they belong on every node), not static (mirror) pods,
    not pods that already finished."""
    meta = pod.get("metadata") or {}
    if any(o.get("kind") == DAEMONSET_OWNER for o in meta.get("ownerReferences") or []):
        return False
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _pod_name(pod: dict[str, Any]) -> tuple[str, str]:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def remediate(assessment: Assessment, ops: ClusterOps) -> list[RemediationStep]:
    steps: list[RemediationStep] = []
    if not assessment.limits.dry_run:
        # Dry-run was turned off: its open plans end, and the nodes are planned again for real.
        for rem in Remediation.objects.filter(finished__isnull=True, dry_run=True):
            rem.phase, rem.finished, rem.updated = Phase.CLOSED, assessment.at, assessment.at
            rem.closed_because = "dry-run turned off"
            rem.save(update_fields=["phase", "finished", "updated", "closed_because"])
            steps.append(_step(rem, assessment.at, "close", "done", detail=rem.closed_because))
        if steps:
            assessment.decisions = plan(assessment.nodes, assessment.classifications, open_remediations(),
                                        assessment.limits)
    nodes = {n.name: n for n in assessment.nodes}
    for decision in assessment.decisions:
        if decision.blocked or not (decision.steps or decision.close or decision.continuing):
            continue
        try:
            steps += _carry_out(decision, nodes.get(decision.node), assessment.at, ops)
        except (TransientError, PermanentError) as exc:
            rem = Remediation.objects.filter(node=decision.node, finished__isnull=True).first()
            if rem is not None:
                steps.append(_step(rem, assessment.at, "error", "failed", detail=str(exc)))
    return steps


def _open(decision: Decision, at: datetime) -> tuple[Remediation, list[RemediationStep]]:
    rem = Remediation.objects.filter(node=decision.node, finished__isnull=True).first()
    evidence = decision.classification.evidence if decision.classification else []
    reasons = decision.classification.reason_texts if decision.classification else []
    if rem is None:
        rem = Remediation.objects.create(node=decision.node, flavor=decision.flavor, target_state=decision.state,
                                         phase=Phase.PLANNED, dry_run=decision.dry_run, nodeclaim=decision.nodeclaim,
                                         reasons=reasons, evidence=evidence, started=at, updated=at)
        outcome = "dry-run" if rem.dry_run else "done"
        return rem, [_step(rem, at, "plan", outcome, detail=f"{decision.state}: {decision.action}",
                           evidence=evidence)]
    if SEVERITY[decision.state] > SEVERITY[rem.target_state]:
        before = rem.target_state
        rem.target_state, rem.reasons, rem.evidence, rem.updated = decision.state, reasons, evidence, at
        rem.save(update_fields=["target_state", "reasons", "evidence", "updated"])
        return rem, [_step(rem, at, "escalate", "dry-run" if rem.dry_run else "done",
                           detail=f"{before} -> {decision.state}: {decision.action}", evidence=evidence)]
    return rem, []


def _carry_out(decision: Decision, node: GpuNode | None, at: datetime, ops: ClusterOps) -> list[RemediationStep]:
    with transaction.atomic():
        if decision.close:
            rem = Remediation.objects.filter(node=decision.node, finished__isnull=True).first()
            if rem is None:
                return []
            rem.phase, rem.finished, rem.updated, rem.closed_because = Phase.CLOSED, at, at, decision.close
            rem.save(update_fields=["phase", "finished", "updated", "closed_because"])
            return [_step(rem, at, "close", "done", detail=decision.close)]
        rem, steps = _open(decision, at)
        if rem.dry_run:
            if steps:  # a new or escalated plan: what each step would do, once
                steps += [_step(rem, at, s, "dry-run", target=_target(s, decision), detail="dry-run: nothing done")
                          for s in decision.steps]
            return steps
    if node is None:
        return steps
    for step in decision.steps:
        if step == CORDON:
            steps += _cordon(rem, node, at, ops)
        elif step == DRAIN:
            steps += _drain(rem, node, at, ops)
        elif step == DELETE_NODECLAIM and rem.phase == Phase.DRAINED:
            steps += _delete_nodeclaim(rem, node, at, ops)
        elif step == HOLD and rem.phase == Phase.DRAINED:
            steps.append(_step(rem, at, "hold", "done", detail="drained; kept cordoned for repair or RMA"))
    return steps


def _target(step: str, decision: Decision) -> str:
    return decision.nodeclaim if step == DELETE_NODECLAIM else decision.node


def _set_phase(rem: Remediation, phase: str, at: datetime) -> None:
    rem.phase, rem.updated = phase, at
    rem.save(update_fields=["phase", "updated"])


def _cordon(rem: Remediation, node: GpuNode, at: datetime, ops: ClusterOps) -> list[RemediationStep]:
    out = []
    if not node.unschedulable or rem.phase == Phase.PLANNED:
        ops.set_unschedulable(node.name, True, remediation=str(rem.pk))
        out.append(_step(rem, at, "cordon", "done", target=node.name, evidence=rem.evidence,
                         detail="spec.unschedulable=true: no new pods"))
    if rem.phase == Phase.PLANNED:
        _set_phase(rem, Phase.CORDONED, at)
    return out


def _last_outcome(rem: Remediation, target: str) -> tuple[str, str] | None:
    last = rem.steps.filter(action="evict", target=target).order_by("-at", "-id").first()
    return (last.outcome, last.detail) if last else None


def _drain(rem: Remediation, node: GpuNode, at: datetime, ops: ClusterOps) -> list[RemediationStep]:
    out = []
    if rem.phase in (Phase.PLANNED, Phase.CORDONED):
        _set_phase(rem, Phase.DRAINING, at)
    for pod in ops.pods_on(node.name):
        if not evictable(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        namespace, name = _pod_name(pod)
        target = f"{namespace}/{name}"
        eviction = ops.evict(namespace, name)
        if eviction.evicted:
            out.append(_step(rem, at, "evict", "done", target=target, detail="evicted through the Eviction API"))
        else:
            detail = f"refused (HTTP {eviction.status}): {eviction.message}; retried on the next pass"
            if _last_outcome(rem, target) != ("blocked", detail):  # one record per refusal, not one per pass
                out.append(_step(rem, at, "evict", "blocked", target=target, detail=detail))
    left = [p for p in ops.pods_on(node.name) if evictable(p)]
    if not left:
        _set_phase(rem, Phase.DRAINED, at)
        out.append(_step(rem, at, "drained", "done", target=node.name, detail="no evictable pods left"))
    return out


def _delete_nodeclaim(rem: Remediation, node: GpuNode, at: datetime, ops: ClusterOps) -> list[RemediationStep]:
    deleted = ops.delete_nodeclaim(node.nodeclaim)
    rem.nodeclaim = node.nodeclaim
    rem.save(update_fields=["nodeclaim"])
    _set_phase(rem, Phase.REPLACING, at)
    detail = "deleted: Karpenter replaces the node" if deleted else "already gone"
    return [_step(rem, at, "delete-nodeclaim", "done", target=node.nodeclaim, detail=detail, evidence=rem.evidence)]


# --- the human side ---------------------------------------------------------------------------------


def uncordon(node: str, ops: ClusterOps, *, note: str = "") -> Remediation:
    """Make the node schedulable again: only ever a person's explicit action. Closes its remediation."""
    now = clock.now()
    found = ops.node(node)
    if found is None:
        raise LookupError(f"no node named {node!r}")
    ops.set_unschedulable(node, False)
    with transaction.atomic():
        rem = Remediation.objects.select_for_update().filter(node=node, finished__isnull=True).first()
        if rem is None:
            labels = (found.get("metadata") or {}).get("labels") or {}

            rem = Remediation.objects.create(node=node, flavor=str(labels.get(FLAVOR_LABEL, "")),
                                             target_state="healthy", phase=Phase.CLOSED, dry_run=False,
                                             started=now, updated=now)
        because = "uncordoned by a person" + (f": {note}" if note else "")
        rem.phase, rem.finished, rem.updated, rem.closed_because = Phase.CLOSED, now, now, because
        rem.save(update_fields=["phase", "finished", "updated", "closed_because"])
        _step(rem, now, "uncordon", "done", target=node, detail=because)
    return rem
