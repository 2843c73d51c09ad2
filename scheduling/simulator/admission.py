"""Kueue admission by quota: ClusterQueues per tenant and flavor, cohorts, borrowing/lending, preemption.

Behaviour follows Kueue v0.19 (docs: site/content/en/docs/concepts/cluster_queue.md, cohort.md, preemption.md,
fair_sharing.md; KEP-1224 lending limits), read at kubernetes-sigs/kueue@v0.19.2 -- facts, not code:

* A ClusterQueue (CQ) with a lending limit keeps `nominal - lendingLimit` as *guaranteed* quota that only it
  may use; the rest of its nominal quota is lendable to the cohort. Without a lending limit everything is
  lendable.
* A cohort (its whole tree: the platform renders nested cohorts without cohort-level quotas, so only the
  root pool limits) can lend the sum of its CQs' lendable quota. A CQ's usage counts against that pool only
  above its guaranteed quota.
* A workload fits when the CQ stays within `nominal + borrowingLimit` (unlimited borrowing without a limit)
  and the cohort pool is not overdrawn. A CQ without a cohort never exceeds its nominal quota.
* Preemption (when the head of a CQ does not fit): `withinClusterQueue: LowerPriority` evicts lower-priority
  workloads of the same CQ; `reclaimWithinCohort` evicts workloads of *borrowing* CQs when the incoming
  workload would fit in its own nominal quota (Any: regardless of priority; LowerPriority: lower only);
  `borrowWithinCohort: LowerPriority` evicts lower-priority workloads of borrowing CQs while borrowing.
  Candidates are ordered: other CQs first, lowest priority first, newest admitted first. With fair
  sharing (docs: concepts/preemption.md "Fair Sharing"), borrowWithinCohort no longer applies; Kueue's
  default strategies run in order -- `LessThanOrEqualToFinalShare` (evict U from the CQ with the highest
  share if the preemptor's share with its workload <= that CQ's share without U), then
  `LessThanInitialShare` (preemptor's share < the target's current share). Either way the chosen set is
  then trimmed, in reverse, to the evictions actually needed.
* Fair sharing orders the heads of the CQs by dominant resource share (borrowed / cohort lendable /
  weight), lowest first; without it, heads that fit within nominal quota go first, then by priority, then
  by age.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from .model import Cohort, Policies, Tenant


class Admitted(Protocol):
    """What preemption needs of an admitted workload (the engine's Workload satisfies it)."""

    cq: CQ
    priority: int
    admitted_s: float
    units: int
    seq: int


@dataclass
class CohortPool:
    """The lendable quota of one root cohort for one flavor and how much of it is borrowed."""

    lendable: int = 0
    used: int = 0  # sum over its CQs of usage above guaranteed
    borrowed: int = 0  # sum over its CQs of usage above nominal
    members: list = field(default_factory=list)
    idle: int = 0  # sum over its CQs of idle lendable quota (what borrowers are using, shared out as "lent")
    since: float = 0.0  # `lent_per_idle` is complete up to here
    lent_per_idle: float = 0.0  # integral of borrowed / idle dt: a CQ's lent time is its idle units times this


@dataclass
class CQ:
    tenant: str
    flavor: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    weight: float
    pool: CohortPool | None
    usage: int = 0
    admitted: dict[int, Admitted] = field(default_factory=dict)
    since: float = 0.0  # borrowed_s/lent_s are complete up to here
    mark: float = 0.0  # the pool's lent_per_idle at `since`
    borrowed_s: float = 0.0  # unit-seconds above nominal
    lent_s: float = 0.0  # unit-seconds of its idle quota that others borrowed
    guaranteed: int = 0  # nominal - lendingLimit: only this CQ may use it (set in __post_init__)
    lendable: int = 0  # the rest of its nominal quota, lent to the cohort

    @property
    def idle(self) -> int:
        return max(0, min(self.lendable, self.nominal - self.usage))

    def __post_init__(self) -> None:
        # Constant for the run: computed once (the admission hot path reads them on every change).
        if self.pool is None:
            self.guaranteed, self.lendable = self.nominal, 0
        elif self.lending_limit is None:
            self.guaranteed, self.lendable = 0, self.nominal
        else:
            self.guaranteed = max(0, self.nominal - self.lending_limit)
            self.lendable = self.nominal - self.guaranteed

    @property
    def borrowed(self) -> int:
        return max(0, self.usage - self.nominal)

    def above_guaranteed(self, usage: int) -> int:
        return max(0, usage - self.guaranteed)


def root_of(cohort: str | None, parents: dict[str, str | None]) -> str | None:
    seen: set[str] = set()
    while cohort is not None and parents.get(cohort) is not None and cohort not in seen:
        seen.add(cohort)
        cohort = parents[cohort]
    return cohort


class Admission:
    """Quota bookkeeping for every CQ; `fits`, `admit`, `release`, `preemption_set`, `order_key`."""

    def __init__(self, tenants: tuple[Tenant, ...], cohorts: tuple[Cohort, ...], policies: Policies) -> None:
        self.policies = policies
        parents = {c.name: c.parent for c in cohorts}
        self.pools: dict[tuple[str, str], CohortPool] = {}
        self.cqs: dict[tuple[str, str], CQ] = {}
        self.root: dict[str, str | None] = {}
        for tenant in tenants:
            root = root_of(tenant.cohort, parents)
            self.root[tenant.name] = root
            for q in tenant.quotas:
                pool = None
                if root is not None:
                    pool = self.pools.setdefault((root, q.flavor), CohortPool())
                cq = CQ(tenant.name, q.flavor, q.nominal, q.borrowing_limit, q.lending_limit, tenant.weight, pool)
                if pool is not None:
                    pool.lendable += cq.lendable
                    pool.idle += cq.idle
                    pool.members.append(cq)
                self.cqs[(tenant.name, q.flavor)] = cq

    def cq(self, tenant: str, flavor: str) -> CQ | None:
        return self.cqs.get((tenant, flavor))

    def cohort_members(self, cq: CQ) -> list[CQ]:
        if cq.pool is None:
            return []
        return [other for other in cq.pool.members if other is not cq]

    # -- quota arithmetic ------------------------------------------------------------------------
    def fits(self, cq: CQ, units: int) -> bool:
        after = cq.usage + units
        if cq.pool is None:
            return after <= cq.nominal
        if cq.borrowing_limit is not None and after > cq.nominal + cq.borrowing_limit:
            return False
        delta = cq.above_guaranteed(after) - cq.above_guaranteed(cq.usage)
        return cq.pool.used + delta <= cq.pool.lendable

    def integrate(self, cq: CQ, now: float) -> None:
        """Bring the borrowed/lent integrals of `cq` (and its pool's accumulator) up to `now`; called before
        each change of its usage. Lent time: the cohort's borrowed units, shared among the CQs in proportion
        to their idle lendable quota -- O(1) per change via the pool's integral of borrowed / idle."""
        pool = cq.pool
        if pool is None:
            return
        if now > pool.since:
            if pool.borrowed > 0 and pool.idle > 0:
                pool.lent_per_idle += pool.borrowed / pool.idle * (now - pool.since)
            pool.since = now
        if now > cq.since:
            cq.borrowed_s += cq.borrowed * (now - cq.since)
            cq.since = now
        cq.lent_s += cq.idle * (pool.lent_per_idle - cq.mark)
        cq.mark = pool.lent_per_idle

    def room(self, cq: CQ) -> int:
        """The most units `cq` could admit right now (`fits(cq, u)` is exactly `u <= room(cq)`)."""
        if cq.pool is None:
            return cq.nominal - cq.usage
        local = max(0, cq.guaranteed - cq.usage)
        room = local + cq.pool.lendable - cq.pool.used
        if cq.borrowing_limit is not None:
            room = min(room, cq.nominal + cq.borrowing_limit - cq.usage)
        return room

    def _change(self, cq: CQ, units: int) -> None:
        before = cq.usage
        idle_before = cq.idle
        cq.usage += units
        if cq.pool is not None:
            cq.pool.idle += cq.idle - idle_before
            cq.pool.used += cq.above_guaranteed(cq.usage) - cq.above_guaranteed(before)
            cq.pool.borrowed += max(0, cq.usage - cq.nominal) - max(0, before - cq.nominal)

    def admit(self, wl: Admitted) -> None:
        self._change(wl.cq, wl.units)
        wl.cq.admitted[wl.seq] = wl

    def release(self, wl: Admitted) -> None:
        if wl.cq.admitted.pop(wl.seq, None) is not None:
            self._change(wl.cq, -wl.units)

    def share(self, cq: CQ, extra: int = 0) -> float:
        """Dominant resource share (one resource per CQ here): borrowed / cohort lendable / weight."""
        if cq.pool is None or cq.pool.lendable == 0:
            return 0.0
        borrowed = max(0, cq.usage + extra - cq.nominal)
        return borrowed / cq.pool.lendable / max(cq.weight, 1e-9)

    def order_key(self, cq: CQ, units: int, priority: int, queued_s: float, seq: int) -> tuple:
        borrowing = cq.usage + units > cq.nominal
        fair = self.share(cq, units) if self.policies.fair_sharing else 0.0
        return (borrowing, fair, -priority, queued_s, seq)

    # -- preemption ------------------------------------------------------------------------------
    def preemption_set(self, cq: CQ, units: int, priority: int) -> list[Admitted] | None:
        """The admitted workloads to evict so that `units` fit in `cq`, or None when no allowed set does."""
        chosen = (self._fair_targets(cq, units, priority) if self.policies.fair_sharing
                  else self._classic_targets(cq, units, priority))
        if chosen is None:
            return None
        # Minimise: in reverse order, give back every eviction the preemptor does not need after all.
        needed: list[Admitted] = []
        for w in reversed(chosen):
            self._change(w.cq, w.units)
            if not self.fits(cq, units):
                self._change(w.cq, -w.units)
                needed.append(w)
        for w in needed:
            self._change(w.cq, w.units)  # restore; the engine releases them for real
        return list(reversed(needed))

    def _within_cq(self, cq: CQ, priority: int) -> list[Admitted]:
        if self.policies.preemption.within_cluster_queue != "LowerPriority":
            return []
        return [w for w in cq.admitted.values() if w.priority < priority]

    def _reclaimable(self, w: Admitted, priority: int) -> bool:
        policy = self.policies.preemption.reclaim_within_cohort
        return policy == "Any" or (policy == "LowerPriority" and w.priority < priority)

    def _classic_targets(self, cq: CQ, units: int, priority: int) -> list[Admitted] | None:
        """Classic preemption: greedy over candidates (borrowing CQs first, lowest priority, newest), with
        usage changed as they are chosen; None (state untouched) when even all of them do not make room."""
        p = self.policies.preemption
        within_nominal = cq.usage + units <= cq.nominal
        candidates = [((1, w.priority, -w.admitted_s, -w.seq), w) for w in self._within_cq(cq, priority)]
        for other in self.cohort_members(cq):
            if other.borrowed <= 0:
                continue
            for w in other.admitted.values():
                allowed = (self._reclaimable(w, priority) if within_nominal
                           else p.borrow_within_cohort == "LowerPriority" and w.priority < priority)
                if allowed:
                    candidates.append(((0, w.priority, -w.admitted_s, -w.seq), w))
        candidates.sort(key=lambda c: c[0])
        chosen: list[Admitted] = []
        for _key, w in candidates:
            if w.cq is not cq and w.cq.borrowed <= 0:
                continue  # an earlier eviction already brought that CQ back within its quota
            self._change(w.cq, -w.units)
            chosen.append(w)
            if self.fits(cq, units):
                return chosen
        for w in chosen:
            self._change(w.cq, w.units)
        return None

    def _fair_targets(self, cq: CQ, units: int, priority: int) -> list[Admitted] | None:
        """Fair sharing: for each strategy (LessThanOrEqualToFinalShare, then LessThanInitialShare), take
        the CQ with the highest share and evict its first workload (lowest priority, newest) that the
        strategy allows, until the preemptor fits."""
        groups: dict[str, list[Admitted]] = {}
        own = sorted(self._within_cq(cq, priority), key=lambda w: (w.priority, -w.admitted_s, -w.seq))
        for other in self.cohort_members(cq):
            ws = [w for w in other.admitted.values() if self._reclaimable(w, priority)]
            if ws:
                groups[other.tenant] = sorted(ws, key=lambda w: (w.priority, -w.admitted_s, -w.seq))
        chosen: list[Admitted] = []
        for strategy in ("final", "initial"):
            exhausted: set[str] = set()
            while not self.fits(cq, units):
                live = [t for t, ws in groups.items() if ws and t not in exhausted and ws[0].cq.borrowed > 0]
                if not live:
                    break
                target = max(live, key=lambda t: (self.share(groups[t][0].cq), t))
                mine = self.share(cq, units)
                for w in groups[target]:
                    ok = (mine <= self.share(w.cq, -w.units) if strategy == "final" else mine < self.share(w.cq))
                    if ok:
                        groups[target].remove(w)
                        self._change(w.cq, -w.units)
                        chosen.append(w)
                        break
                else:
                    exhausted.add(target)
            if self.fits(cq, units):
                return chosen
        for w in own:  # withinClusterQueue: lower priority of the preemptor's own queue
            self._change(w.cq, -w.units)
            chosen.append(w)
            if self.fits(cq, units):
                return chosen
        for w in chosen:
            self._change(w.cq, w.units)
        return None
