"""Which GPU allocation modes a tenant may use, and where its GPU pods must run.

The defaults below follow DESIGN.md §3 and are seeded into the database (AllocationPolicy rows) by a
migration; platform admins edit the rows, and may tighten one tenant further (TenantIsolation).
Everything except `allowed_modes` / `level_modes` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpufleet.core import sharing

# Mode names and their meaning come from the sharing-mode registry (gpufleet.core.sharing).
WHOLE, MIG, HAMI = sharing.WHOLE.name, sharing.MIG.name, sharing.HAMI.name
MODES = sharing.NAMES

# The modes a trust level gets by default (each mode's `default_trust_levels`).
DEFAULT_MODES: dict[str, frozenset[str]] = sharing.default_modes()

# Extended resources (container limits/requests) that select each mode.
MODE_RESOURCES: dict[str, tuple[str, ...]] = {m.name: m.resource_patterns for m in sharing.MODES}


def order(modes: Iterable[str]) -> list[str]:
    """Modes in the canonical order (the registry's): stable output for YAML and the API."""
    return sharing.ordered(modes)


def mode_of_resource(resource: str) -> str | None:
    """The allocation mode a resource name asks for, or None if it is not a GPU resource."""
    return sharing.mode_of_resource(resource)


def forbidden_resources(allowed: Iterable[str]) -> list[str]:
    """Resource name patterns a pod of a tenant with these allowed modes must not ask for."""
    allowed = set(allowed)
    return [p for mode in MODES if mode not in allowed for p in MODE_RESOURCES[mode]]


def mode_errors(modes: Any, field: str = "allowed_modes") -> dict[str, list[str]]:
    """Shape check of a list of modes (used by actions; the subset rules live there)."""
    if not isinstance(modes, list | tuple) or not all(isinstance(m, str) for m in modes):
        return {field: ["must be a list of modes"]}
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        return {field: [f"unknown mode(s) {', '.join(unknown)}; expected some of {', '.join(MODES)}"]}
    if len(set(modes)) != len(modes):
        return {field: ["lists a mode twice"]}
    return {}


def effective_modes(level_modes: Iterable[str], override: Iterable[str] | None) -> frozenset[str]:
    """The tenant's modes: its trust level's, narrowed by its own override (never widened)."""
    base = frozenset(level_modes)
    return base if override is None else base & frozenset(override)


@dataclass(frozen=True)
class Placement:
    """Where a tenant's synced pods must land. Empty for tenants that share the general GPU pool."""

    node_selector: dict[str, str]
    tolerations: tuple[dict[str, str], ...]

    @property
    def enforce_tolerations(self) -> list[str]:
        """vCluster's `sync.toHost.pods.enforceTolerations` syntax: key=value:Effect."""
        return [f"{t['key']}={t['value']}:{t['effect']}" for t in self.tolerations]


DEDICATED_POOL_LABEL = "gpufleet.io/dedicated-tenant"
# What marks a GPU node (scheduling.nodepools renders them from these): every GPU pool taints its nodes with
# GPU_TAINT_KEY (NoSchedule) and labels them with the GPU mode and the flavor. Defined here, below both apps,
# because the tenant's node-isolation policy (tenants.isolation.nodes) refuses them to pods without a GPU.
GPU_TAINT_KEY = sharing.GPU_RESOURCE
GPU_MODE_LABEL = sharing.GPU_MODE_LABEL
GPU_FLAVOR_LABEL = "gpufleet.io/flavor"


def placement(trust_level: str, slug: str) -> Placement:
    """Untrusted tenants get nodes of their own: a taint only their pods tolerate, and a selector
    that keeps their pods off every other node. One label/taint key, valued with the tenant's slug,
    so the node pool that serves it (scheduling's Karpenter NodePool) can be rendered from the same rule."""
    if trust_level != "untrusted":
        return Placement({}, ())
    return Placement(
        {DEDICATED_POOL_LABEL: slug},
        ({"key": DEDICATED_POOL_LABEL, "operator": "Equal", "value": slug, "effect": "NoSchedule"},),
    )


def level_row(trust_level: str) -> Any:
    """The trust level's AllocationPolicy row (None: the built-in defaults). One query, or none within a
    reconcile that read it already (the view, the scheduling inputs and the GPU-modes condition all ask)."""
    from tenants.reconcile import shared_rows

    from .models import AllocationPolicy

    return shared_rows(("allocation_policy", trust_level),
                       lambda: AllocationPolicy.objects.filter(trust_level=trust_level).first())


def isolation_row(tenant_id: int) -> Any:
    """The tenant's TenantIsolation row (None: no narrowing), shared within a reconcile like `level_row`."""
    from tenants.reconcile import shared_rows

    from .models import TenantIsolation

    return shared_rows(("tenant_isolation", tenant_id),
                       lambda: TenantIsolation.objects.filter(tenant_id=tenant_id).first())


def level_modes(trust_level: str) -> frozenset[str]:
    """The platform-wide modes of a trust level: the admin-edited row, else the default."""
    row = level_row(trust_level)
    return frozenset(row.allowed_modes) if row is not None else DEFAULT_MODES.get(trust_level, frozenset())


def allowed_modes(tenant: Any) -> set[str]:
    """GPU allocation modes `tenant` may use: its trust level's policy ∩ its own override.

    The scheduling app uses this for ClusterQueue coverage; the Kyverno policy enforces the same set.
    """
    iso = isolation_row(tenant.pk)
    return set(effective_modes(level_modes(tenant.trust_level), iso.allowed_modes if iso else None))


# Whether tenants of a level may reach the internet by default (seeded with the modes).
DEFAULT_WORLD_EGRESS = {"untrusted": False, "standard": True, "trusted": True}


def level_world_egress(trust_level: str) -> bool:
    row = level_row(trust_level)
    return row.world_egress if row is not None else DEFAULT_WORLD_EGRESS.get(trust_level, False)
