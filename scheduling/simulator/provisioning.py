"""Node provisioning and consolidation decisions for one node pool (Karpenter / Cluster Autoscaler).

* Provisioning: pods that are bound to no node (admitted jobs, endpoint replicas) ask for nodes; the
  provisioner launches enough whole nodes for the pending units that in-flight nodes will not cover, never
  beyond the pool's GPU limit. A node is Ready after a delay drawn uniformly from the provisioner's range.
* Consolidation: `WhenEmpty` deletes a node that has had no pod for `consolidateAfter`;
  `WhenEmptyOrUnderutilized` also deletes a node whose pods all fit on the other nodes, evicting them
  (delete consolidation; replacing a node by a cheaper one is not modelled). Training pods carry
  `karpenter.sh/do-not-disrupt` on this platform, so only inference pods are ever evicted.
"""

from __future__ import annotations

import math
import random

from .model import PROVISIONING_DELAY_S, NodePool
from .placement import Node, fits_elsewhere


def delay_s(provisioner: str, rng: random.Random) -> float:
    low, high = PROVISIONING_DELAY_S.get(provisioner, PROVISIONING_DELAY_S["karpenter"])
    return rng.uniform(low, high)


def nodes_to_launch(pool: NodePool, pending_units: int, node_units: int, nodes_now: int, in_flight: int) -> int:
    if pool.provisioner == "none" or pending_units <= 0:
        return 0
    wanted = math.ceil(pending_units / node_units) - in_flight
    room = pool.gpu_limit // pool.gpus_per_node - nodes_now - in_flight if pool.gpu_limit else wanted
    return max(0, min(wanted, room))


def empty_for_long_enough(node: Node, pool: NodePool, now: float) -> bool:
    return node.empty_since_s is not None and now - node.empty_since_s >= pool.consolidate_after_s - 1e-9


def underutilized_candidate(nodes: list[Node], pool: NodePool, now: float) -> Node | None:
    """The node `WhenEmptyOrUnderutilized` would delete now: quiet for consolidateAfter, only disruptible
    pods, and they all fit elsewhere. The least used such node goes first."""
    if pool.consolidation_policy != "WhenEmptyOrUnderutilized" or len(nodes) < 2:
        return None
    quiet = [n for n in nodes if n.pods and n.external == 0 and all(n.disruptible.values())
             and now - n.changed_s >= pool.consolidate_after_s - 1e-9]
    for node in sorted(quiet, key=lambda n: (n.used, n.id)):
        if fits_elsewhere(nodes, node):
            return node
    return None
