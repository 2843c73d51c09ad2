"""Placement policy: which host clusters may, and should, carry a tenant. Pure: facts in, decisions out.

Rules, in order:
- trust: a cluster (or node pool) whose `trust_levels` is non-empty hosts only tenants of those levels -- an
  untrusted tenant lands only where untrusted is allowed, and a cluster reserved for untrusted tenants never gets
  a standard or trusted one;
- admin choice: a cluster an admin names wins over preferences, but never over trust;
- purpose, then region: among the allowed clusters the one whose purpose (default `general`) and region match;
  ties go to `default` (an upgraded single-cluster installation keeps everything there), then by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_CLUSTER = "default"


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    purpose: str = "general"
    region: str = ""
    trust_levels: tuple[str, ...] = ()

    @classmethod
    def of(cls, cluster: object) -> ClusterFacts:
        return cls(cluster.name, cluster.purpose, cluster.region,  # type: ignore[attr-defined]
                   tuple(cluster.trust_levels or ()))  # type: ignore[attr-defined]


def allows(trust_levels: Iterable[str], trust_level: str) -> bool:
    """A cluster's or node pool's `trust_levels` admit this tenant trust level (empty = every level)."""
    levels = tuple(trust_levels)
    return not levels or trust_level in levels


def refusal(cluster: ClusterFacts, trust_level: str) -> str:
    """Why `cluster` may not carry a tenant of `trust_level` ('' = it may)."""
    if allows(cluster.trust_levels, trust_level):
        return ""
    return (f"cluster '{cluster.name}' hosts only {', '.join(cluster.trust_levels)} tenants "
            f"(this tenant is {trust_level})")


def rank(cluster: ClusterFacts, purpose: str, region: str) -> tuple[bool, bool, bool, str]:
    return (cluster.purpose != purpose, bool(region) and cluster.region != region,
            cluster.name != DEFAULT_CLUSTER, cluster.name)


def choose_home(clusters: Sequence[ClusterFacts], trust_level: str, *, purpose: str = "general",
                region: str = "", admin_choice: str = "") -> tuple[str | None, str]:
    """(cluster name, '') for a new tenant's home, or (None, why not)."""
    if admin_choice:
        chosen = next((c for c in clusters if c.name == admin_choice), None)
        if chosen is None:
            return None, f"unknown cluster {admin_choice!r}"
        why = refusal(chosen, trust_level)
        return (None, why) if why else (chosen.name, "")
    allowed = [c for c in clusters if allows(c.trust_levels, trust_level)]
    if not allowed:
        return None, f"no cluster hosts {trust_level} tenants"
    return min(allowed, key=lambda c: rank(c, purpose, region)).name, ""


def choose(clusters: Sequence[ClusterFacts], trust_level: str, *, purpose: str, region: str = "",
           exclude: Iterable[str] = ()) -> str | None:
    """The best allowed cluster of `purpose` (e.g. an inference placement) not already used, or None."""
    skip = set(exclude)
    allowed = [c for c in clusters if c.name not in skip and allows(c.trust_levels, trust_level)
               and c.purpose == purpose]
    return min(allowed, key=lambda c: rank(c, purpose, region)).name if allowed else None


@dataclass(frozen=True)
class Target:
    """One placement as delivered: the cluster's tree, whether it is home, and whether it may carry the tenant."""

    cluster: str
    tree: str
    home: bool
    refused: str = ""


def targets(placements: Sequence[tuple[ClusterFacts, str, bool]], trust_level: str) -> list[Target]:
    """The tenant's placements ((cluster, tree, home) rows) checked against trust: a placement on a cluster
    that no longer admits the tenant's level (its trust level or the cluster changed) is kept but refused --
    nothing is rendered there and the placement carries the reason. Home first, then by cluster name."""
    out = [Target(c.name, tree, home, refusal(c, trust_level)) for c, tree, home in placements]
    return sorted(out, key=lambda t: (not t.home, t.cluster))
