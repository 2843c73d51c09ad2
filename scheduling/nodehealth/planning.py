"""What remediation would do now for each node, given the states and the safety limits. Pure.

Steps per state: watch -> none; cordon -> cordon; drain -> cordon, drain; replace -> cordon, drain, then
(Karpenter-managed nodes) delete the NodeClaim so Karpenter replaces the node, or (other nodes) hold it
cordoned for repair. A node already in remediation continues (and escalates if its state got worse)
without counting against the limits again. A node that would *start* remediation must pass, in order of
severity (replace first) and then name:
- at most `max_nodes` nodes in remediation at once, fleet-wide;
- at most `max_percent` % of its flavor's nodes (never less than one node);
- never the last schedulable node of its flavor.
Dry-run plans count like real ones, so a dry-run shows exactly what a live run would do. A node that is
healthy again stays cordoned until a human uncordons it (a dry-run plan just closes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from .classify import Classification
from .inventory import GpuNode
from .models import SEVERITY, State

CORDON, DRAIN, DELETE_NODECLAIM, HOLD = "cordon", "drain", "delete-nodeclaim", "hold"
# The steps an open remediation has behind it, by phase (models.Phase).
DONE: dict[str, frozenset[str]] = {
    "planned": frozenset(), "cordoned": frozenset({CORDON}), "draining": frozenset({CORDON}),
    "drained": frozenset({CORDON, DRAIN, HOLD}), "replacing": frozenset({CORDON, DRAIN, HOLD, DELETE_NODECLAIM}),
}


@dataclass(frozen=True)
class Limits:
    max_nodes: int = 1
    max_percent: Decimal = Decimal(10)
    dry_run: bool = True


@dataclass(frozen=True)
class OpenRemediation:
    node: str
    flavor: str
    target_state: str
    phase: str
    dry_run: bool


@dataclass(frozen=True)
class Decision:
    node: str
    flavor: str
    state: str
    steps: tuple[str, ...] = ()
    blocked: str = ""
    continuing: bool = False  # an open remediation goes on
    close: str = ""  # why an open dry-run plan closes
    holding: bool = False  # remediated, healthy again or not: waits for a human to uncordon
    nodeclaim: str = ""
    dry_run: bool = True
    classification: Classification | None = field(default=None, compare=False)

    @property
    def action(self) -> str:
        """One line for people and the CLI: what remediation does about this node now."""
        if self.blocked:
            return f"blocked: {self.blocked}"
        if self.close:
            return f"close plan: {self.close}"
        if self.holding and not self.steps:
            return "hold: stays cordoned until a person uncordons it (gpufleet fleet uncordon)"
        if not self.steps:
            return "none"
        words = {CORDON: "cordon", DRAIN: "drain (evict pods)",
                 DELETE_NODECLAIM: f"delete NodeClaim {self.nodeclaim}", HOLD: "hold cordoned for repair"}
        text = ", then ".join(words[s] for s in self.steps)
        prefix = "dry-run, would " if self.dry_run else ""
        return f"{prefix}{'continue: ' if self.continuing else ''}{text}"


def steps_for(state: str, node: GpuNode) -> tuple[str, ...]:
    if state == State.CORDON:
        return (CORDON,)
    if state == State.DRAIN:
        return (CORDON, DRAIN)
    if state == State.REPLACE:
        return (CORDON, DRAIN, DELETE_NODECLAIM) if node.karpenter else (CORDON, DRAIN, HOLD)
    return ()


def flavor_allowance(total: int, percent: Decimal) -> int:
    return max(1, math.floor(Decimal(total) * percent / 100))


def plan(nodes: Iterable[GpuNode], classifications: dict[str, Classification],
         open_remediations: Iterable[OpenRemediation], limits: Limits) -> list[Decision]:
    nodes = list(nodes)
    by_name = {n.name: n for n in nodes}
    opened = {r.node: r for r in open_remediations}
    busy: set[str] = set(opened)  # nodes in remediation, now and as decided below
    flavor_nodes: dict[str, list[GpuNode]] = {}
    for node in nodes:
        flavor_nodes.setdefault(node.flavor, []).append(node)
    # Schedulable = not cordoned and not about to be; the last-node rule counts these.
    schedulable = {n.name for n in nodes if not n.unschedulable and n.name not in opened}
    decisions: dict[str, Decision] = {}

    def state_of(name: str) -> str:
        found = classifications.get(name)
        return found.state if found else State.HEALTHY.value

    # Continue open remediations first: they hold their places within the limits.
    for name, rem in sorted(opened.items()):
        node = by_name.get(name)
        state = state_of(name)
        cls = classifications.get(name)
        if node is None:
            decisions[name] = Decision(name, rem.flavor, state, close="the node no longer exists" if rem.dry_run
                                       else "", holding=not rem.dry_run, dry_run=rem.dry_run, classification=cls)
            continue
        target = state if SEVERITY[state] > SEVERITY[rem.target_state] else rem.target_state
        if SEVERITY[state] < SEVERITY[State.CORDON] and rem.dry_run:
            decisions[name] = Decision(name, node.flavor, state, close="the node is healthy again, nothing was done",
                                       dry_run=True, classification=cls)
            continue
        remaining = tuple(s for s in steps_for(target, node) if s not in DONE.get(rem.phase, frozenset()))
        decisions[name] = Decision(name, node.flavor, state, steps=remaining, continuing=True,
                                   holding=True, nodeclaim=node.nodeclaim, dry_run=rem.dry_run, classification=cls)

    candidates = [n for n in nodes if n.name not in opened]
    candidates.sort(key=lambda n: (-SEVERITY[state_of(n.name)], n.name))
    for node in candidates:
        state = state_of(node.name)
        cls = classifications.get(node.name)
        steps = steps_for(state, node)
        if not steps:
            decisions[node.name] = Decision(node.name, node.flavor, state, dry_run=limits.dry_run, classification=cls)
            continue
        blocked = ""
        members = flavor_nodes.get(node.flavor, [])
        in_flavor = sorted(n.name for n in members if n.name in busy)
        allowance = flavor_allowance(len(members), limits.max_percent)
        if len(busy) >= limits.max_nodes:
            blocked = (f"at most {limits.max_nodes} node(s) in remediation at once"
                       + (f" (now: {', '.join(sorted(busy))})" if busy else ""))
        elif len(in_flavor) >= allowance:
            blocked = (f"at most {allowance} of the {len(members)} node(s) of flavor {node.flavor or '(none)'} "
                       f"({limits.max_percent} %) in remediation at once (now: {', '.join(in_flavor)})")
        elif node.name in schedulable and not ({n.name for n in members} & schedulable) - {node.name}:
            blocked = f"{node.name} is the last schedulable node of flavor {node.flavor or '(none)'}"
        if blocked:
            decisions[node.name] = Decision(node.name, node.flavor, state, steps=(), blocked=blocked,
                                            dry_run=limits.dry_run, classification=cls)
            continue
        busy.add(node.name)
        schedulable.discard(node.name)
        decisions[node.name] = Decision(node.name, node.flavor, state, steps=steps, nodeclaim=node.nodeclaim,
                                        dry_run=limits.dry_run, classification=cls)
    return [decisions[name] for name in sorted(decisions)]
