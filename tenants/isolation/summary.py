"""A tenant's isolation as data (the API's `isolation` action) and in words (the portal's isolation page).

`describe` is pure: it turns the data into sentences a tenant owner reads, from the same rules the
renderer enforces (policy.py: modes per trust level, world egress, placement), so the page cannot drift
from what is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpufleet.core import sharing

from . import policy
from .models import TenantIsolation

# Each mode's heading and sentence, from the sharing-mode registry.
MODE_WORDS: dict[str, tuple[str, str]] = {m.name: (m.title, m.description) for m in sharing.MODES}


def isolation_data(tenant: Any) -> dict[str, Any]:
    iso = TenantIsolation.objects.filter(tenant=tenant).first()
    return {
        "trust_level": tenant.trust_level,
        "level_modes": policy.order(policy.level_modes(tenant.trust_level)),
        "allowed_modes_override": iso.allowed_modes if iso else None,
        "allowed_modes": policy.order(policy.allowed_modes(tenant)),
        "world_egress": policy.level_world_egress(tenant.trust_level),
        "egress_cidrs": iso.egress_cidrs if iso else [],
        "egress_fqdns": iso.egress_fqdns if iso else [],
    }


@dataclass(frozen=True)
class ModeLine:
    mode: str
    name: str
    text: str
    allowed: bool
    why_not: str = ""


@dataclass(frozen=True)
class Description:
    modes: list[ModeLine]
    egress: list[str]
    placement: str


def describe(data: dict[str, Any], slug: str) -> Description:
    level = data["trust_level"]
    allowed, level_modes = set(data["allowed_modes"]), set(data["level_modes"])
    modes = []
    for mode in policy.MODES:
        name, text = MODE_WORDS[mode]
        why = "" if mode in allowed else (
            f"trust level {level} does not allow it" if mode not in level_modes
            else "a platform admin narrowed this tenant's modes")
        modes.append(ModeLine(mode, name, text, mode in allowed, why))
    egress = ["Other tenants: no traffic in either direction.",
              "DNS through the cluster's kube-dns is allowed (needed for name-based rules).",
              "The cloud instance-metadata endpoint (169.254.169.254) is always blocked."]
    if data["world_egress"]:
        egress.insert(0, f"The internet: allowed (trust level {level} allows world egress).")
    else:
        egress.insert(0, f"The internet: blocked (trust level {level} allows no world egress).")
    if data["egress_cidrs"]:
        egress.insert(1, "Networks a platform admin allowed: " + ", ".join(data["egress_cidrs"]) + ".")
    if data["egress_fqdns"]:
        egress.insert(1, "DNS names a platform admin allowed: " + ", ".join(data["egress_fqdns"]) + ".")
    where = policy.placement(level, slug)
    placement = (f"GPU pods run on nodes of their own (label {policy.DEDICATED_POOL_LABEL}={slug}, tainted so only "
                 "this tenant's pods are scheduled there)." if where.node_selector
                 else "GPU pods run in the shared GPU node pools.")
    return Description(modes, egress, placement)
