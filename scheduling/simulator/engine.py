"""The discrete-event engine: one heap of timed events, one scheduling pass after each instant.

Events: job arrival, job finish, external work ending, node ready, node consolidation check, endpoint tick
(traffic and autoscaling, every STEP_S seconds). After all events of one instant, a pass runs: Kueue
admission (admission.py), then placement of admitted work (placement.py), then provisioning
(provisioning.py). Randomness comes only from `random.Random(seed)`; ties are broken by a sequence number,
so a scenario and a seed give one result.
"""

from __future__ import annotations

import heapq
import random
from bisect import insort
from collections import deque
from dataclasses import dataclass, field

from . import autoscaling, placement, provisioning
from .admission import CQ, Admission
from .model import Endpoint, JobSpec, NodePool, Scenario
from .outputs import build_run

STEP_S = 10.0  # endpoint traffic and autoscaler resolution

ARRIVE, FINISH, EXTERNAL_END, NODE_READY, EMPTY_CHECK, SWEEP, TICK, REPLICA_READY = range(8)


@dataclass(eq=False)
class Workload:
    """A job (Kueue workload) or one endpoint replica: pods that must all be bound to run."""

    seq: int
    pool: str
    pods: int
    units_per_pod: int
    gang: bool
    spread: bool
    disruptible: bool
    priority: int = 0
    job: JobSpec | None = None
    endpoint: str | None = None
    cq: CQ | None = None  # type: ignore[assignment]
    max_nodes: int = 0
    single_domain: bool = False
    state: str = "queued"  # queued | admitted | running | done
    nodes: list[placement.Node] = field(default_factory=list)
    queued_s: float = 0.0
    waited_s: float = 0.0
    admitted_s: float = 0.0
    started_s: float = 0.0
    version: int = 0
    ready: bool = False
    blocked_at: int = -1  # the pool's version when this workload last failed to bind any pod

    @property
    def units(self) -> int:
        return self.pods * self.units_per_pod


@dataclass
class PoolState:
    spec: NodePool
    node_units: int
    slices: int
    nodes: list[placement.Node] = field(default_factory=list)
    in_flight: int = 0
    waiting: list[Workload] = field(default_factory=list)  # admitted, not all pods bound
    node_s: float = 0.0  # node-seconds (from launch request to deletion)
    launched: int = 0  # nodes existing or in flight, for node-seconds
    hist: list[int] = field(default_factory=list)  # nodes by free units (placement.set_free keeps it)
    version: int = 0  # bumped whenever capacity appears (a pod leaves, a node joins): retry placement


@dataclass
class TenantStats:
    jobs: int = 0
    waits: list[float] = field(default_factory=list)
    unit_s: float = 0.0  # GPU-equivalent seconds used (running)
    borrowed_s: float = 0.0
    lent_s: float = 0.0


@dataclass
class EndpointState:
    spec: Endpoint
    bursts: list[tuple[float, float]]
    queue: deque = field(default_factory=deque)  # [arrival_s, count]
    replicas: list[Workload] = field(default_factory=list)
    credit: float = 0.0
    requests: int = 0
    served: int = 0
    dropped: int = 0
    ttft: dict[float, int] = field(default_factory=dict)
    replica_s: float = 0.0
    duty: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    below_since: float | None = None
    next_poll: float = 0.0


class Simulation:
    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.sc = scenario
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.heap: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self.admission = Admission(scenario.tenants, scenario.cohorts, scenario.policies)
        self.flavors = {f.name: f for f in scenario.flavors}
        self.pools: dict[str, PoolState] = {}
        self.pool_of_flavor: dict[str, str] = {}
        self.tenants = {t.name: TenantStats() for t in scenario.tenants}
        self.pending: dict[int, dict[int, list[tuple]]] = {}  # id(cq) -> units -> sorted keys
        self.pending_cqs: dict[int, CQ] = {}
        self.by_seq: dict[int, Workload] = {}
        self.min_priority = min((j.priority for j in scenario.jobs), default=0)
        self.dirty = False
        # fleet integrals (GPU-equivalent seconds)
        self.cap = self.alloc = self.busy = self.partial = 0.0
        self.cap_s = self.alloc_s = self.busy_s = self.partial_s = 0.0
        self.replica_busy_s = 0.0
        self.evictions = 0
        self.last = 0.0
        self.cq_since = 0.0
        self.endpoints: dict[str, EndpointState] = {}
        self._node_ids = 0
        self.events = 0  # events handled (the benchmark's events/s)
        self.touched: dict[int, CQ] = {}  # queues whose admission may have changed since the last pass

    # -- bookkeeping -------------------------------------------------------------------------------
    def push(self, t: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (t, self._seq, kind, payload))

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def advance(self, t: float) -> None:
        dt = t - self.last
        if dt > 0:
            self.cap_s += self.cap * dt
            self.alloc_s += self.alloc * dt
            self.busy_s += self.busy * dt
            self.partial_s += self.partial * dt
            for ps in self.pools.values():
                ps.node_s += ps.launched * dt
            self.last = t
        self.now = t

    def quota_integrals(self, cq: CQ | None) -> None:
        """Borrowed and lent time of `cq` up to now (called before each change of its usage)."""
        if cq is not None:
            self.admission.integrate(cq, self.now)

    def slices_of(self, flavor: str) -> int:
        f = self.flavors.get(flavor)
        return f.slices_per_gpu if f is not None else 1

    # -- setup ---------------------------------------------------------------------------------------
    def setup(self) -> None:
        for pool in self.sc.pools:
            slices = self.flavors[pool.flavor].slices_per_gpu if pool.flavor in self.flavors else 1
            ps = PoolState(pool, pool.gpus_per_node * slices, slices)
            ps.hist = [0] * (ps.node_units + 1)
            self.pools[pool.name] = ps
            self.pool_of_flavor.setdefault(pool.flavor, pool.name)
            for i in range(pool.nodes):
                ps.launched += 1
                node = self.add_node(ps)
                used = pool.initial_used[i] if i < len(pool.initial_used) else 0
                if used:
                    used = min(used, node.capacity)
                    node.external = used
                    placement.set_free(node, node.free - used)
                    node.empty_since_s = None
                    self.alloc += used / slices
                    self.busy += used / slices
            if any(pool.initial_used):
                self.push(pool.initial_used_until_s, EXTERNAL_END, pool.name)
            if pool.consolidation_policy == "WhenEmptyOrUnderutilized" and pool.provisioner != "none":
                self.push(60.0, SWEEP, pool.name)
        for job in self.sc.jobs:
            if job.submit_s < self.sc.horizon_s:
                self.push(job.submit_s, ARRIVE, job)
        for index, ep in enumerate(self.sc.endpoints):
            # Each endpoint's traffic has its own stream: variants that differ in policy see the same requests.
            rng = random.Random(self.seed * 7_919 + index + 1)
            es = EndpointState(ep, autoscaling.burst_windows(ep.traffic, self.sc.horizon_s, rng), rng=rng)
            self.endpoints[ep.name] = es
        if self.endpoints:
            self.push(0.0, TICK, None)

    def add_node(self, ps: PoolState) -> placement.Node:
        self._node_ids += 1
        index = len(ps.nodes)
        per_domain = ps.spec.nodes_per_domain
        domain = self._node_ids if per_domain <= 0 else index // per_domain
        node = placement.Node(self._node_ids, ps.spec.name, ps.node_units, domain, ps.node_units,
                              changed_s=self.now, empty_since_s=self.now, hist=ps.hist)
        ps.hist[node.free] += 1
        ps.nodes.append(node)
        ps.version += 1
        self.cap += ps.node_units / ps.slices
        if ps.spec.consolidation_policy in ("WhenEmpty", "WhenEmptyOrUnderutilized") and ps.spec.provisioner != "none":
            self.push(self.now + ps.spec.consolidate_after_s, EMPTY_CHECK, (ps.spec.name, node.id))
        return node

    # -- run -----------------------------------------------------------------------------------------
    def run(self) -> dict:
        self.setup()
        horizon = self.sc.horizon_s
        handlers = {ARRIVE: self.on_arrive, FINISH: self.on_finish, EXTERNAL_END: self.on_external_end,
                    NODE_READY: self.on_node_ready, EMPTY_CHECK: self.on_empty_check, SWEEP: self.on_sweep,
                    TICK: self.on_tick, REPLICA_READY: self.on_replica_ready}
        heap = self.heap
        while heap and heap[0][0] < horizon:
            t = heap[0][0]
            self.advance(t)
            while heap and heap[0][0] == t:
                _, _, kind, payload = heapq.heappop(heap)
                self.events += 1
                handlers[kind](payload)
            if self.dirty:
                self.dirty = False
                self.schedule()
        self.advance(horizon)
        for cq in self.admission.cqs.values():
            self.quota_integrals(cq)
            st = self.tenants[cq.tenant]
            st.borrowed_s += cq.borrowed_s / self.slices_of(cq.flavor)
            st.lent_s += cq.lent_s / self.slices_of(cq.flavor)
        return build_run(self)

    # -- events --------------------------------------------------------------------------------------
    def on_arrive(self, job: JobSpec) -> None:
        self.tenants.setdefault(job.tenant, TenantStats()).jobs += 1
        pool = self.pool_of_flavor.get(job.flavor, "")
        wl = Workload(self.next_seq(), pool, job.pods, job.units_per_pod, self.sc.policies.gang, False, False,
                      job.priority, job=job, max_nodes=job.max_nodes, single_domain=job.single_domain,
                      queued_s=self.now)
        wl.cq = self.admission.cq(job.tenant, job.flavor)  # type: ignore[assignment]
        self.by_seq[wl.seq] = wl
        if wl.cq is None or not pool:
            return  # inadmissible: no quota for this flavor (its wait runs to the horizon)
        self.enqueue(wl)

    def enqueue(self, wl: Workload) -> None:
        wl.state = "queued"
        cq = wl.cq
        buckets = self.pending.setdefault(id(cq), {})
        self.pending_cqs[id(cq)] = cq
        insort(buckets.setdefault(wl.units, []), (-wl.priority, wl.queued_s, wl.seq))
        self.touched[id(cq)] = cq
        self.dirty = True

    def touch_cohort(self, cq: CQ) -> None:
        """Quota was freed in `cq`: it and every queue that borrows from the same cohort may admit now."""
        for member in (cq.pool.members if cq.pool is not None else [cq]):
            if id(member) in self.pending_cqs:
                self.touched[id(member)] = member

    def on_finish(self, payload: tuple[int, int]) -> None:
        seq, version = payload
        wl = self.by_seq[seq]
        if wl.version != version or wl.state != "running":
            return
        self.stop(wl)
        wl.state = "done"
        self.dirty = True

    def stop(self, wl: Workload) -> None:
        """Unbind and release the quota of a running or admitted job."""
        ps = self.pools[wl.pool]
        if wl.state == "running":
            ran = self.now - wl.started_s
            self.tenants[wl.job.tenant].unit_s += wl.units * ran / ps.slices  # type: ignore[union-attr]
            self.busy -= wl.units / ps.slices
        elif wl.nodes:
            self.partial -= len(wl.nodes) * wl.units_per_pod / ps.slices
        self.unbind(wl, ps)
        if wl in ps.waiting:
            ps.waiting.remove(wl)
        if wl.cq is not None and wl.job is not None:
            self.quota_integrals(wl.cq)
            self.touch_cohort(wl.cq)
            self.admission.release(wl)
        wl.version += 1

    def unbind(self, wl: Workload, ps: PoolState) -> None:
        if wl.nodes:
            ps.version += 1
        for node in {n.id: n for n in wl.nodes}.values():
            units = placement.release(node, wl.seq, self.now)
            self.alloc -= units / ps.slices
            if node.empty_since_s is not None and ps.spec.provisioner != "none":
                self.push(self.now + ps.spec.consolidate_after_s, EMPTY_CHECK, (ps.spec.name, node.id))
        wl.nodes = []

    def on_external_end(self, pool_name: str) -> None:
        ps = self.pools[pool_name]
        ps.version += 1
        for node in ps.nodes:
            if node.external:
                placement.set_free(node, node.free + node.external)
                self.alloc -= node.external / ps.slices
                self.busy -= node.external / ps.slices
                node.external = 0
                node.changed_s = self.now
                if not node.pods:
                    node.empty_since_s = self.now
                    self.push(self.now + ps.spec.consolidate_after_s, EMPTY_CHECK, (pool_name, node.id))
        self.dirty = True

    def on_node_ready(self, pool_name: str) -> None:
        ps = self.pools[pool_name]
        ps.in_flight -= 1
        self.add_node(ps)
        self.dirty = True

    def on_empty_check(self, payload: tuple[str, int]) -> None:
        pool_name, node_id = payload
        ps = self.pools[pool_name]
        if ps.spec.provisioner == "none":
            return  # a static pool is never consolidated
        node = next((n for n in ps.nodes if n.id == node_id), None)
        if node is None or not provisioning.empty_for_long_enough(node, ps.spec, self.now):
            return
        if any(w.pool == pool_name for w in ps.waiting):
            return  # pending pods will want it
        self.remove_node(ps, node)

    def remove_node(self, ps: PoolState, node: placement.Node) -> None:
        ps.hist[node.free] -= 1
        ps.nodes.remove(node)
        ps.launched -= 1
        self.cap -= node.capacity / ps.slices

    def on_sweep(self, pool_name: str) -> None:
        ps = self.pools[pool_name]
        self.push(self.now + 60.0, SWEEP, pool_name)
        node = provisioning.underutilized_candidate(ps.nodes, ps.spec, self.now)
        if node is None:
            return
        for seq in sorted(node.pods):
            self.evict_replica(self.by_seq[seq], ps)
        self.remove_node(ps, node)
        self.dirty = True

    def evict_replica(self, wl: Workload, ps: PoolState) -> None:
        es = self.endpoints[wl.endpoint]  # type: ignore[index]
        self.evictions += wl.pods
        if wl.ready:
            es.dropped += round(es.duty * es.spec.concurrency)  # the requests in flight on it are lost
        self.release_replica(wl, ps)
        wl.state = "admitted"
        wl.queued_s = self.now
        ps.waiting.append(wl)

    def release_replica(self, wl: Workload, ps: PoolState) -> None:
        if wl.nodes and wl.state != "running":
            self.partial -= len(wl.nodes) * wl.units_per_pod / ps.slices
        self.unbind(wl, ps)
        wl.ready = False
        wl.version += 1

    def on_replica_ready(self, payload: tuple[int, int]) -> None:
        seq, version = payload
        wl = self.by_seq[seq]
        if wl.version == version and wl.state == "running":
            wl.ready = True

    # -- the scheduling pass -------------------------------------------------------------------------
    def schedule(self) -> None:
        self.evicted: list[Workload] = []
        self.admit_pass(preempt=True)
        if self.evicted:
            # Evicted workloads go back to their queues only after the pass (their pods must terminate
            # first, as in Kueue), and may not preempt in return at this instant: no ping-pong.
            for wl in self.evicted:
                self.enqueue(wl)
            self.dirty = False
            self.admit_pass(preempt=False)
        for ps in self.pools.values():
            self.place_pass(ps)
        for ps in self.pools.values():
            self.provision(ps)

    def head(self, key: int, limit: int | None) -> tuple | None:
        """The next workload of a queue (BestEffortFIFO: priority, then age) among sizes below `limit`."""
        best = None
        for units, items in self.pending[key].items():
            if (limit is None or units < limit) and (best is None or items[0] < best[0]):
                best = (items[0], units)
        return best

    def admit_pass(self, preempt: bool) -> None:
        """Admit queued workloads of the touched queues, best head first (admission.order_key). A queue's
        key depends only on its own usage, so a heap of one head per queue keeps Kueue's order."""
        adm = self.admission
        touched, self.touched = self.touched, {}
        failed: dict[int, int] = {}  # queue -> smallest size that did not fit this pass
        preempted: set[int] = set()  # queues that preempted in this pass (at most once each)
        heap: list[tuple] = []

        def push(key: int, cq: CQ) -> None:
            room = adm.room(cq)
            best = None
            if preempt and key not in failed and key not in preempted:
                # The queue's true head may preempt, so it is tried even when it cannot fit as things are.
                best = self.head(key, None)
                if best is not None and best[1] > room and not self.may_preempt(cq, self.by_seq[best[0][2]]):
                    best = None
            if best is None:
                limit = min(failed.get(key, room + 1), room + 1)
                best = self.head(key, limit) if limit > 1 else None
            if best is not None:
                (neg_prio, queued, seq), units = best
                heapq.heappush(heap, (adm.order_key(cq, units, -neg_prio, queued, seq), key, units, seq))

        for key, cq in touched.items():
            if self.pending.get(key):
                push(key, cq)
        while heap:
            _order, key, units, seq = heapq.heappop(heap)
            cq = self.pending_cqs[key]
            wl = self.by_seq[seq]
            if adm.fits(cq, units):
                self.admit(wl, units)
                push(key, cq)
                continue
            victims = None
            if preempt and key not in failed and key not in preempted and self.may_preempt(cq, wl):
                victims = adm.preemption_set(cq, units, wl.priority)
            if victims:
                preempted.add(key)
                for victim in victims:
                    self.preempt(victim)  # type: ignore[arg-type]
                if adm.fits(cq, units):
                    self.admit(wl, units)
                    push(key, cq)
                    continue
            failed[key] = min(units, failed.get(key, units))
            if failed[key] > 1:
                push(key, cq)

    def may_preempt(self, cq: CQ, wl: Workload) -> bool:
        p = self.sc.policies.preemption
        if wl.priority > self.min_priority and (p.within_cluster_queue != "Never" or p.borrow_within_cohort != "Never"):
            return True
        if cq.pool is None:
            return False
        if self.sc.policies.fair_sharing or (p.reclaim_within_cohort != "Never" and cq.usage + wl.units <= cq.nominal):
            return cq.pool.borrowed - cq.borrowed > 0  # another queue of the cohort is borrowing
        return False

    def admit(self, wl: Workload, units: int) -> None:
        buckets = self.pending[id(wl.cq)]
        items = buckets[units]
        items.remove((-wl.priority, wl.queued_s, wl.seq))
        if not items:
            del buckets[units]
        self.quota_integrals(wl.cq)
        wl.admitted_s = self.now
        self.admission.admit(wl)  # type: ignore[arg-type]
        wl.waited_s += self.now - wl.queued_s
        wl.state = "admitted"
        self.pools[wl.pool].waiting.append(wl)

    def preempt(self, wl: Workload) -> None:
        self.evictions += wl.pods
        self.stop(wl)
        wl.queued_s = self.now
        wl.state = "queued"
        self.evicted.append(wl)

    def place_pass(self, ps: PoolState) -> None:
        if not ps.waiting:
            return
        free = sum(f * c for f, c in enumerate(ps.hist))
        failed_shapes: set[tuple[int, int]] = set()  # (pods, units per pod) of gangs that found no room
        for wl in list(ps.waiting):
            if free <= 0:
                break
            if wl.blocked_at == ps.version:
                continue  # nothing was freed since it last found no room
            if wl.gang and not wl.single_domain and any(
                    p <= wl.pods and u <= wl.units_per_pod for p, u in failed_shapes):
                wl.blocked_at = ps.version  # a smaller gang did not fit: neither does this one
                continue
            missing = wl.pods - len(wl.nodes)
            if wl.gang and not wl.nodes:
                if free < wl.units:
                    continue
                bound = placement.place_gang(ps.nodes, wl.seq, wl.pods, wl.units_per_pod,
                                             single_domain=wl.single_domain, max_nodes=wl.max_nodes,
                                             spread=wl.spread, disruptible=wl.disruptible, now=self.now) or []
            else:
                if free < wl.units_per_pod:
                    continue
                bound = placement.place_pods(ps.nodes, wl.seq, missing, wl.units_per_pod, spread=wl.spread,
                                             disruptible=wl.disruptible, now=self.now)
            if not bound:
                wl.blocked_at = ps.version
                if wl.gang and not wl.single_domain and not wl.max_nodes:
                    failed_shapes.add((wl.pods, wl.units_per_pod))
                continue
            gpu = len(bound) * wl.units_per_pod / ps.slices
            free -= len(bound) * wl.units_per_pod
            self.alloc += gpu
            wl.nodes += bound
            if len(wl.nodes) < wl.pods:
                self.partial += gpu  # pods bound, waiting for the rest of their gang: held idle
                continue
            if len(bound) < wl.pods:
                self.partial -= (wl.pods - len(bound)) * wl.units_per_pod / ps.slices
            ps.waiting.remove(wl)
            self.start(wl, ps)

    def start(self, wl: Workload, ps: PoolState) -> None:
        wl.state = "running"
        wl.started_s = self.now
        wl.version += 1
        if wl.job is not None:
            self.busy += wl.units / ps.slices
            self.tenants[wl.job.tenant].waits.append(wl.waited_s + (self.now - wl.admitted_s))
            wl.waited_s = 0.0
            self.push(self.now + wl.job.duration_s, FINISH, (wl.seq, wl.version))
        else:
            es = self.endpoints[wl.endpoint]  # type: ignore[index]
            self.push(self.now + es.spec.model_load_s, REPLICA_READY, (wl.seq, wl.version))

    def provision(self, ps: PoolState) -> None:
        if ps.spec.provisioner == "none" or not ps.waiting:
            return
        pending = sum((w.pods - len(w.nodes)) * w.units_per_pod for w in ps.waiting)
        launch = provisioning.nodes_to_launch(ps.spec, pending, ps.node_units, len(ps.nodes), ps.in_flight)
        for _ in range(launch):
            ps.in_flight += 1
            ps.launched += 1
            self.push(self.now + provisioning.delay_s(ps.spec.provisioner, self.rng), NODE_READY, ps.spec.name)

    # -- endpoints -----------------------------------------------------------------------------------
    def on_tick(self, _payload: object) -> None:
        for name in sorted(self.endpoints):
            self.tick_endpoint(self.endpoints[name])
        self.push(self.now + STEP_S, TICK, None)

    def tick_endpoint(self, es: EndpointState) -> None:
        ep, t = es.spec, self.now
        arrivals = autoscaling.poisson(autoscaling.rate_at(ep.traffic, t, es.bursts) * STEP_S, es.rng)
        es.requests += arrivals
        if arrivals:
            es.queue.append([t, arrivals])
        ready = [r for r in es.replicas if r.ready]
        capacity = len(ready) * ep.capacity_rps * STEP_S
        es.credit = min(es.credit + capacity, capacity) if capacity else 0.0
        served = 0
        while es.queue and es.credit >= 1:
            head = es.queue[0]
            take = min(head[1], int(es.credit))
            wait = round(t - head[0] + ep.base_ttft_s, 1)
            es.ttft[wait] = es.ttft.get(wait, 0) + take
            served += take
            es.credit -= take
            head[1] -= take
            if head[1] == 0:
                es.queue.popleft()
        while es.queue and t - es.queue[0][0] >= ep.timeout_s:
            es.dropped += es.queue.popleft()[1]
        es.served += served
        es.duty = served / capacity if capacity else 0.0
        slices = self.pools[ep.pool].slices
        ready_units = sum(r.units for r in ready) / slices
        self.replica_busy_s += ready_units * es.duty * STEP_S
        es.replica_s += sum(1 for r in es.replicas if r.state == "running") * STEP_S
        if t >= es.next_poll:
            es.next_poll = t + ep.polling_s
            self.autoscale(es, len(ready))

    def autoscale(self, es: EndpointState, ready: int) -> None:
        ep = es.spec
        waiting = sum(b[1] for b in es.queue)
        inflight = es.duty * ep.concurrency * ready
        kv = (inflight + waiting) / (ready * ep.concurrency) if ready else 0.0
        want = autoscaling.desired_replicas(ep, ready=ready, waiting=waiting + inflight, duty=es.duty, kv=kv)
        want = max(autoscaling.minimum_at(ep, self.now), min(ep.max_replicas, want))
        current = len(es.replicas)
        if want > current:
            es.below_since = None
            ps = self.pools[ep.pool]
            for _ in range(want - current):
                wl = Workload(self.next_seq(), ep.pool, ep.pods_per_replica, ep.units_per_pod, ep.gang, True, True,
                              endpoint=ep.name, queued_s=self.now, state="admitted")
                self.by_seq[wl.seq] = wl
                es.replicas.append(wl)
                ps.waiting.append(wl)
            self.dirty = True
        elif want < current:
            if es.below_since is None:
                es.below_since = self.now
            elif self.now - es.below_since >= ep.cooldown_s:
                es.below_since = None
                ps = self.pools[ep.pool]
                # The ReplicaSet controller's ranking: unbound and not-ready pods first, then pods on nodes
                # holding more replicas of the same set, then the newest.
                per_node: dict[int, int] = {}
                for r in es.replicas:
                    if r.nodes:
                        per_node[r.nodes[0].id] = per_node.get(r.nodes[0].id, 0) + 1
                order = sorted(es.replicas, key=lambda r: (
                    r.ready, r.state == "running", -per_node.get(r.nodes[0].id, 0) if r.nodes else 0, -r.seq))
                for wl in order[: current - want]:
                    if wl in ps.waiting:
                        ps.waiting.remove(wl)
                    self.release_replica(wl, ps)
                    wl.state = "done"
                    es.replicas.remove(wl)
                self.dirty = True
        else:
            es.below_since = None


def simulate(scenario: Scenario, seed: int = 0) -> dict:
    """Run one scenario and return its outputs (the CLI's run document)."""
    from .scenario import expand

    return Simulation(expand(scenario, seed), seed).run()
