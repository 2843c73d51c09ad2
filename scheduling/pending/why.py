"""Why is my workload pending? One sentence, its evidence and the next step. Pure: facts in, answer out.

Facts (gathered by `scheduling.pending.sources`): the Kueue Workload (status conditions, admission), the
KAI PodGroup (`status.schedulingConditions`), the workload's pods and Job, and the platform's own state:
the tenant's trust level and allowed modes, the quotas of every ClusterQueue in its cohort with their
current reservations (ClusterQueue `status.flavorsReservation`), the flavors, and the node pools with
their GPUs and the NodeClaims Karpenter is still provisioning.

Reasons, in the order they are checked: not queued at all (no queue label), finished / running (not
pending), preempted by a higher priority, trust level does not allow the GPU resource, insufficient
quota in a flavor (N more needed; M borrowable from the cohort now, or not because of lending and
borrowing limits), the queue itself is missing or stopped, a gang waiting for all its pods, no node can
take it (node pool at its GPU limit; Karpenter provisioning), otherwise waiting for its first evaluation.
Message formats are Kueue v0.19's and KAI v0.13's (docs/operations.md quotes them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
INSUFFICIENT_UNUSED = re.compile(r"insufficient unused quota for (\S+) in flavor ([^,\s]+), (\S+) more needed")
EXCEEDS_MAX = re.compile(r"insufficient quota for (\S+) in flavor ([^,\s]+), previously considered podsets requests "
                         r"\((\S+)\) \+ current podset request \((\S+)\) > maximum capacity \((\S+)\)")
UNAVAILABLE = re.compile(r"resource (\S+) unavailable in ClusterQueue")
GANG_FOUND = re.compile(r"Resources were found for (\d+) pods while (\d+) are required for gang scheduling")
NO_NODE = re.compile(r"didn't have enough (?:resources: (\S+?)\.?(?:,|$|\s)|of mig profile: (\S+))")


@dataclass(frozen=True)
class QuotaState:
    """One ClusterQueue's quota in one flavor (units of the flavor's counted resource) and what it holds."""

    tenant: str
    flavor: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    reserved: int  # ClusterQueue status.flavorsReservation total for the resource


@dataclass(frozen=True)
class PoolState:
    name: str
    flavor: str
    gpu_limit: int
    gpus: int  # GPUs of the pool's nodes now
    provisioning: tuple[str, ...] = ()  # NodeClaims launched, not Ready yet


@dataclass
class Facts:
    tenant: str
    namespace: str
    name: str
    trust_level: str
    allowed_modes: frozenset[str]
    cohort: str = ""
    workload: dict[str, Any] | None = None
    podgroup: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    owner: dict[str, Any] | None = None  # the Job (or pod) the person named
    flavor_modes: dict[str, str] = field(default_factory=dict)  # flavor -> mode
    resource_flavors: dict[str, list[str]] = field(default_factory=dict)  # resource -> flavors providing it
    quotas: list[QuotaState] = field(default_factory=list)  # every ClusterQueue of the cohort (own included)
    pools: list[PoolState] = field(default_factory=list)


@dataclass(frozen=True)
class Explanation:
    workload: str
    namespace: str
    reason: str
    pending: bool
    sentence: str
    next_step: str
    evidence: tuple[dict[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "namespace": self.namespace, "reason": self.reason,
                "pending": self.pending, "sentence": self.sentence, "next_step": self.next_step,
                "evidence": list(self.evidence)}


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in ((obj or {}).get("status") or {}).get("conditions") or []
            if isinstance(c, dict)}


def _true(cond: dict[str, Any] | None) -> bool:
    return bool(cond) and str(cond.get("status")) == "True"


def _number(raw: Any) -> Decimal | None:
    try:
        return Decimal(str(raw))
    except (InvalidOperation, ValueError):
        return None


def _sentence(text: Any) -> str:
    """A quoted message inside our sentence: without its own closing full stops."""
    return str(text or "").strip().rstrip(".")


def _n(value: Decimal | int) -> str:
    value = Decimal(value)
    return str(int(value)) if value == value.to_integral_value() else format(value.normalize(), "f")


def _condition_evidence(kind: str, name: str, cond: dict[str, Any]) -> dict[str, str]:
    return {"source": f"{kind} {name}", "field": f"status.conditions[{cond.get('type')}]",
            "value": f"{cond.get('status')} {cond.get('reason', '')}".strip(), "message": str(cond.get("message", "")),
            "since": str(cond.get("lastTransitionTime", ""))}


def explain(f: Facts) -> Explanation:
    wl, pg = f.workload, f.podgroup
    name = str(_meta(wl).get("name") or _meta(pg).get("name") or f.name)

    def answer(reason: str, sentence: str, next_step: str, *evidence: dict[str, str], pending: bool = True
               ) -> Explanation:
        return Explanation(name, f.namespace, reason, pending, sentence, next_step, tuple(evidence))

    if wl is None and pg is None:
        return _not_queued(f, answer)
    conds = _conditions(wl)
    wl_kind = f"Workload {f.namespace}/{name}"
    if _true(conds.get("Finished")):
        c = conds["Finished"]
        return answer("finished", f"{name} is not pending: it finished ({c.get('reason')}).", "nothing to do",
                      _condition_evidence("Workload", name, c), pending=False)
    reserved = _true(conds.get("QuotaReserved"))
    preempted = conds.get("Preempted") if _true(conds.get("Preempted")) else None
    evicted = conds.get("Evicted") if _true(conds.get("Evicted")) else None
    if not reserved and (preempted or (evicted and evicted.get("reason") == "Preempted")):
        c = preempted or evicted or {}
        why = str(c.get("message", ""))
        cause = re.search(r"due to ([^;]+)", why)
        return answer(
            "preempted",
            f"{name} was preempted at {c.get('lastTransitionTime', '?')} to make room for a higher-priority "
            f"workload ({cause.group(1) if cause else c.get('reason', 'preemption')}); Kueue requeued it and it "
            "waits for quota again.",
            "wait for the higher-priority work to finish, or run it with a higher priority class your tenant "
            "may use (a lower-priority job is the first to be preempted again)",
            *[_condition_evidence("Workload", name, x) for x in (preempted, evicted) if x])
    if not reserved:
        qr = conds.get("QuotaReserved")
        if qr is None:
            if f.podgroup is not None and not f.workload:
                return _after_admission(f, name, answer)
            return answer("waiting", f"{name} is queued but Kueue has not evaluated it yet.",
                          "wait a moment (Kueue evaluates queued workloads in order)",
                          {"source": wl_kind, "field": "status.conditions", "value": "none yet", "message": ""})
        return _not_reserved(f, name, qr, answer)
    if not _true(conds.get("Admitted")) and conds.get("Admitted"):
        c = conds["Admitted"]
        return answer("admission-checks",
                      f"{name} has quota but waits for its admission checks: {_sentence(c.get('message'))}.",
                      "wait for the admission checks to pass", _condition_evidence("Workload", name, c))
    return _after_admission(f, name, answer)


def _not_queued(f: Facts, answer: Any) -> Explanation:
    owner = f.owner or (f.pods[0] if f.pods else None)
    if owner is None:
        raise LookupError(f"no workload, job or pod named {f.name!r} in {f.namespace}")
    labels = _meta(owner).get("labels") or {}
    kind, oname = str(owner.get("kind") or "object"), str(_meta(owner).get("name"))
    if QUEUE_LABEL not in labels:
        return answer(
            "not-queued",
            f"{kind} {oname} is not queued at all: it has no {QUEUE_LABEL} label, so Kueue never admits it "
            "and its GPU pods are not scheduled.",
            f"add the label {QUEUE_LABEL}: gpu (the tenant's queue) to the {kind} and create it again",
            {"source": f"{kind} {f.namespace}/{oname}", "field": "metadata.labels", "value": QUEUE_LABEL + " absent",
             "message": ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))})
    return answer("waiting", f"{kind} {oname} names queue {labels[QUEUE_LABEL]} but has no Workload yet.",
                  "wait a moment; if it stays so, check that the queue exists (gpufleet quota list)",
                  {"source": f"{kind} {f.namespace}/{oname}", "field": f"metadata.labels[{QUEUE_LABEL}]",
                   "value": str(labels[QUEUE_LABEL]), "message": ""})


def _quota_for(f: Facts, flavor: str, tenant: str) -> QuotaState | None:
    return next((q for q in f.quotas if q.flavor == flavor and q.tenant == tenant), None)


def borrowable(f: Facts, flavor: str) -> tuple[int, int, int | None, str]:
    """(borrowable now, unused quota lending limits keep back, own borrowing room, detail) in `flavor`."""
    if not f.cohort:
        return 0, 0, None, "the tenant is in no cohort, so there is nothing to borrow"
    free = held = 0
    parts = []
    for q in f.quotas:
        if q.flavor != flavor or q.tenant == f.tenant:
            continue
        unused = max(0, q.nominal - q.reserved)
        lendable = unused if q.lending_limit is None else min(unused, q.lending_limit)
        free += lendable
        held += unused - lendable
        parts.append(f"{q.tenant}: {unused} unused, lends {lendable}")
    own = _quota_for(f, flavor, f.tenant)
    room = None
    if own is not None and own.borrowing_limit is not None:
        room = max(0, own.borrowing_limit - max(0, own.reserved - own.nominal))
    return (free if room is None else min(free, room)), held, room, "; ".join(parts)


def _not_reserved(f: Facts, name: str, qr: dict[str, Any], answer: Any) -> Explanation:
    message, reason = str(qr.get("message", "")), str(qr.get("reason", ""))
    ev = _condition_evidence("Workload", name, qr)
    missing = UNAVAILABLE.search(message)
    if missing or reason == "NoMatchingFlavor":
        resource = missing.group(1) if missing else ""
        providers = f.resource_flavors.get(resource, [])
        denied = [fl for fl in providers if f.flavor_modes.get(fl) not in f.allowed_modes]
        if providers and len(denied) == len(providers):
            modes = ", ".join(sorted({f.flavor_modes.get(fl, "?") for fl in denied}))
            allowed = ", ".join(sorted(f.allowed_modes)) or "none"
            return answer(
                "trust-level",
                f"{name} asks for {resource}, which only {modes} flavor(s) {', '.join(denied)} provide, and trust "
                f"level {f.trust_level} does not allow {modes} GPUs (allowed: {allowed}).",
                "ask for a resource your trust level allows, or ask a platform admin for a higher trust level",
                ev, {"source": f"tenant {f.tenant}", "field": "trust level", "value": f.trust_level,
                     "message": f"allowed modes: {allowed}"})
        if resource and not providers:
            return answer("no-flavor", f"{name} asks for {resource}, which no flavor of the fleet provides.",
                          "ask for a GPU resource the fleet offers (gpufleet flavor list)", ev)
    short = INSUFFICIENT_UNUSED.search(message)
    if short:
        resource, flavor, needed = short.group(1), short.group(2), _number(short.group(3)) or Decimal(0)
        lend, held, room, detail = borrowable(f, flavor)
        own = _quota_for(f, flavor, f.tenant)
        head = (f"{name} waits for quota in flavor {flavor}: it needs {_n(needed)} more {resource} than its "
                f"queue has unused" + (f" (nominal {own.nominal}, {own.reserved} in use)" if own else ""))
        if lend >= needed:
            tail = f"; {lend} are borrowable from cohort {f.cohort} now, so Kueue can admit it on its next pass."
            step = "wait: the cohort has room now"
        elif not f.cohort:
            tail = "; the tenant is in no cohort, so nothing can be borrowed."
            step = (f"ask for {_n(needed)} more {flavor} quota (gpufleet quota propose {f.tenant} --flavor {flavor} "
                    f"--nominal {(own.nominal if own else 0) + int(needed)}) or wait for running work to finish")
        else:
            limits = []
            if held:
                limits.append(f"lending limits keep {held} unused back")
            if room is not None and room < needed:
                limits.append(f"its own borrowing limit leaves room for {room}")
            tail = (f"; only {lend} borrowable from cohort {f.cohort} now"
                    + (f" ({'; '.join(limits)})" if limits else "") + ".")
            step = (f"wait for work in the cohort to finish, or ask for {_n(needed - lend)} more {flavor} quota "
                    f"(gpufleet quota propose {f.tenant} --flavor {flavor} "
                    f"--nominal {(own.nominal if own else 0) + int(needed - lend)})")
        evidence = [ev]
        if f.cohort:
            evidence.append({"source": f"cohort {f.cohort}", "field": f"unused quota in {flavor}",
                             "value": str(lend), "message": detail})
        return answer("quota", head + tail, step, *evidence)
    over = EXCEEDS_MAX.search(message)
    if over:
        resource, flavor = over.group(1), over.group(2)
        request = (_number(over.group(3)) or Decimal(0)) + (_number(over.group(4)) or Decimal(0))
        capacity = _number(over.group(5)) or Decimal(0)
        return answer(
            "quota",
            f"{name} needs {_n(request)} {resource} in flavor {flavor}, more than the {_n(capacity)} its queue can "
            f"ever have (nominal quota plus what it may borrow): it needs {_n(request - capacity)} more and "
            "cannot be admitted as it is.",
            f"ask for more {flavor} quota (gpufleet quota propose {f.tenant} --flavor {flavor} ...) or make the "
            "workload smaller", ev)
    if reason in ("Misconfigured", "Inadmissible", "Suspended"):
        return answer("queue", f"{name} cannot be admitted: {_sentence(message)}.",
                      "check the tenant is active and its queue exists (gpufleet tenant show; gpufleet quota list)", ev)
    if reason in ("WaitingForPodsReady", "Waiting"):
        return answer("waiting", f"{name} waits until workloads admitted before it have all their pods ready.",
                      "wait", ev)
    return answer("waiting", f"{name} is waiting for quota: {_sentence(message or reason)}.", "wait", ev)


def _pods_of_group(f: Facts) -> int:
    return sum(1 for p in f.pods if not _meta(p).get("deletionTimestamp"))


def _after_admission(f: Facts, name: str, answer: Any) -> Explanation:
    pg = f.podgroup
    gang_min = int(((pg or {}).get("spec") or {}).get("minMember") or 0)
    existing = _pods_of_group(f)
    wl_conds = _conditions(f.workload)
    if _true(wl_conds.get("WaitingForReplacementPods")) or (gang_min and existing < gang_min):
        return answer(
            "gang",
            f"{name} is a gang of {gang_min or '?'} pods that start together, and only {existing} exist: it waits "
            "for all of them.",
            "check why the missing pods are not created (the Job's parallelism/completions, a failed pod "
            "that was not replaced)",
            {"source": f"PodGroup {f.namespace}/{_meta(pg).get('name', name)}", "field": "spec.minMember",
             "value": str(gang_min), "message": f"{existing} pod(s) exist"})
    latest = _latest_scheduling_condition(pg)
    if latest is not None:
        items = latest.get("reasons") or []
        text = " ".join([str(latest.get("message", ""))] + [str(r.get("message", "")) for r in items])
        ev = {"source": f"PodGroup {f.namespace}/{_meta(pg).get('name')}",
              "field": "status.schedulingConditions[UnschedulableOnNodePool]",
              "value": ", ".join(str(r.get("reason")) for r in items) or str(latest.get("reason")),
              "message": str(latest.get("message", "")), "since": str(latest.get("lastTransitionTime", ""))}
        reasons = {str(r.get("reason")) for r in latest.get("reasons") or []}
        if reasons & {"OverLimit", "NonPreemptibleOverQuota"}:
            return answer("quota", f"{name} is over its KAI queue's quota: {_sentence(latest.get('message'))}.",
                          f"ask for more quota (gpufleet quota propose {f.tenant} ...) or run it preemptible", ev)
        gang = GANG_FOUND.search(text)
        if gang or NO_NODE.search(text):
            return _no_node(f, name, answer, ev, gang)
    pending_pods = [p for p in f.pods if ((p.get("status") or {}).get("phase") == "Pending")]
    unschedulable = [c for p in pending_pods for c in (p.get("status") or {}).get("conditions") or []
                     if c.get("type") == "PodScheduled" and c.get("status") == "False"]
    if unschedulable:
        c = unschedulable[0]
        ev = {"source": f"Pod {f.namespace}/{_meta(pending_pods[0]).get('name')}", "field": "PodScheduled",
              "value": f"False {c.get('reason', '')}".strip(), "message": str(c.get("message", ""))}
        return _no_node(f, name, answer, ev, None)
    return answer("admitted", f"{name} is not pending: it is admitted and its pods are scheduled.", "nothing to do",
                  pending=False)


def _latest_scheduling_condition(pg: dict[str, Any] | None) -> dict[str, Any] | None:
    conds = [c for c in ((pg or {}).get("status") or {}).get("schedulingConditions") or []
             if isinstance(c, dict) and str(c.get("status", "True")) == "True"]
    if not conds:
        return None
    return max(conds, key=lambda c: int(str(c.get("transitionID") or 0)) if str(c.get("transitionID") or "0").isdigit()
               else 0)


def _flavors_of(f: Facts) -> list[str]:
    admission = ((f.workload or {}).get("status") or {}).get("admission") or {}
    out: list[str] = []
    for assignment in admission.get("podSetAssignments") or []:
        for flavor in (assignment.get("flavors") or {}).values():
            if flavor not in out and flavor in f.flavor_modes:
                out.append(str(flavor))
    return out


def _no_node(f: Facts, name: str, answer: Any, ev: dict[str, str], gang: re.Match[str] | None) -> Explanation:
    flavors = _flavors_of(f)
    pools = [p for p in f.pools if not flavors or p.flavor in flavors]
    gang_part = (f"only {gang.group(1)} of the {gang.group(2)} pods of its gang fit, and a gang starts all "
                 "together or not at all; " if gang else "")
    provisioning = [p for p in pools if p.provisioning]
    at_limit = [p for p in pools if p.gpus >= p.gpu_limit]
    if provisioning:
        p = provisioning[0]
        claims = ", ".join(p.provisioning)
        return answer("no-node", f"{name} has quota but no node can take it yet: {gang_part}Karpenter is provisioning "
                      f"{claims} in node pool {p.name}.", "wait for the node(s) to join (a few minutes)", ev,
                      {"source": f"node pool {p.name}", "field": "NodeClaims not Ready", "value": claims,
                       "message": f"{p.gpus} of {p.gpu_limit} GPUs in nodes"})
    if at_limit:
        p = at_limit[0]
        return answer("no-node", f"{name} has quota but no node can take it: {gang_part}node pool {p.name} "
                      f"(flavor {p.flavor}) is at its GPU limit ({p.gpus} of {p.gpu_limit} GPUs), so Karpenter adds "
                      "no node.", f"wait for running work to end, or ask a platform admin to raise {p.name}'s GPU "
                      "limit", ev, {"source": f"node pool {p.name}", "field": "spec.limits[nvidia.com/gpu]",
                                    "value": str(p.gpu_limit), "message": f"{p.gpus} GPUs in nodes"})
    where = f" for flavor {', '.join(flavors)}" if flavors else ""
    return answer("no-node", f"{name} has quota but no node{where} can take it now: {gang_part}"
                  f"{_sentence(ev.get('message')) or 'the scheduler found no node with enough free GPUs'}.",
                  "wait for GPUs to free up; if it lasts, ask a platform admin about capacity" +
                  ("" if pools else " (no node pool serves this flavor, so no node is added automatically)"), ev)
