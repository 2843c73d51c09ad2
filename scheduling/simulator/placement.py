"""Placement of pods on GPU nodes: gang (all-or-nothing) or pod-by-pod, bin-packing or spreading,
optionally inside one topology (NVLink) domain.

A node's capacity is `gpus_per_node * slices_per_gpu` units of its pool's flavor. MIG instances of a
single-profile layout and HAMi shares are interchangeable inside a node, so a node is a pool of units;
a pod must fit on one node.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Node:
    id: int
    pool: str
    capacity: int
    domain: int
    free: int
    external: int = 0  # units held by work outside the simulation (scenario `initial_used`)
    pods: dict[int, int] = field(default_factory=dict)  # workload seq -> units on this node
    disruptible: dict[int, bool] = field(default_factory=dict)
    changed_s: float = 0.0  # last time a pod was bound or removed (consolidateAfter counts from here)
    empty_since_s: float | None = None
    hist: list[int] | None = None  # the pool's count of nodes by free units (kept by set_free)

    @property
    def used(self) -> int:
        return self.capacity - self.free


def set_free(node: Node, free: int) -> None:
    """Change a node's free units, keeping its pool's histogram (a fast "could it fit" count) exact."""
    if node.hist is not None:
        node.hist[node.free] -= 1
        node.hist[free] += 1
    node.free = free


def fitting_pods(hist: list[int], units_per_pod: int) -> int:
    """How many pods of `units_per_pod` the pool's nodes could take, from the histogram alone."""
    return sum(count * (free // units_per_pod) for free, count in enumerate(hist) if count and free >= units_per_pod)


def _take(node: Node, seq: int, units: int, disruptible: bool, now: float) -> None:
    set_free(node, node.free - units)
    node.pods[seq] = node.pods.get(seq, 0) + units
    node.disruptible[seq] = disruptible
    node.changed_s = now
    node.empty_since_s = None


def release(node: Node, seq: int, now: float) -> int:
    units = node.pods.pop(seq, 0)
    node.disruptible.pop(seq, None)
    set_free(node, node.free + units)
    node.changed_s = now
    if not node.pods and node.external == 0:
        node.empty_since_s = now
    return units


def place_gang(nodes: list[Node], seq: int, pods: int, units_per_pod: int, *, single_domain: bool,
               max_nodes: int, spread: bool, disruptible: bool, now: float) -> list[Node] | None:
    """Bind all `pods` or none. Returns the node of each pod."""
    groups: list[list[Node]]
    hist = nodes[0].hist if nodes else None
    if not single_domain and hist is not None and fitting_pods(hist, units_per_pod) < pods:
        return None
    if single_domain:
        by_domain: dict[int, list[Node]] = {}
        for n in nodes:
            by_domain.setdefault(n.domain, []).append(n)
        groups = [by_domain[d] for d in sorted(by_domain)]
    else:
        groups = [nodes]
    for group in groups:
        if single_domain and sum(n.free // units_per_pod for n in group) < pods:
            continue
        plan = _plan(group, pods, units_per_pod, max_nodes, spread)
        if plan is not None:
            for n in plan:
                _take(n, seq, units_per_pod, disruptible, now)
            return plan
    return None


def _plan(group: list[Node], pods: int, units_per_pod: int, max_nodes: int, spread: bool) -> list[Node] | None:
    # Spreading: most free node per pod. Packing: one node if any takes the whole gang, else fewest nodes
    # (most free first); ties by node id keep it deterministic.
    if spread:
        plan: list[Node] = []
        free = {n.id: n.free for n in group}
        for _ in range(pods):
            best = max((n for n in group if free[n.id] >= units_per_pod), key=lambda n: (free[n.id], -n.id),
                       default=None)
            if best is None:
                return None
            free[best.id] -= units_per_pod
            plan.append(best)
        return plan
    need = pods * units_per_pod
    best = None
    for n in group:  # the whole gang on one node: best fit (the fullest node that takes it), as bin-packing does
        if n.free >= need and (best is None or n.free < best.free):
            best = n
    if best is not None:
        return [best] * pods
    ordered = sorted((n for n in group if n.free >= units_per_pod), key=lambda n: (-n.free, n.id))
    plan = []
    used_nodes = 0
    for n in ordered:
        fit = min(n.free // units_per_pod, pods - len(plan))
        if fit <= 0:
            continue
        used_nodes += 1
        if max_nodes and used_nodes > max_nodes:
            return None
        plan += [n] * fit
        if len(plan) == pods:
            return plan
    return None


def place_pods(nodes: list[Node], seq: int, pods: int, units_per_pod: int, *, spread: bool,
               disruptible: bool, now: float) -> list[Node]:
    """kube-scheduler, one pod at a time: bind as many of `pods` as fit now (maybe fewer)."""
    placed: list[Node] = []
    for _ in range(pods):
        fitting = [n for n in nodes if n.free >= units_per_pod]
        if not fitting:
            break
        if spread:  # LeastAllocated (the default scoring)
            node = max(fitting, key=lambda n: (n.free, -n.id))
        else:  # MostAllocated: pack
            node = min(fitting, key=lambda n: (n.free, n.id))
        _take(node, seq, units_per_pod, disruptible, now)
        placed.append(node)
    return placed


def fits_elsewhere(nodes: list[Node], leaving: Node) -> bool:
    """Could every pod on `leaving` be rebound to the other nodes (first fit, largest first)?"""
    free = {n.id: n.free for n in nodes if n is not leaving}
    per_pod = sorted(leaving.pods.values(), reverse=True)
    for units in per_pod:
        target = next((nid for nid in sorted(free) if free[nid] >= units), None)
        if target is None:
            return False
        free[target] -= units
    return True
