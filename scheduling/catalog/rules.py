"""Pure rules of the GPU catalog: resource names and GPU-equivalent weights per flavor mode."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from gpufleet.core import sharing

# Mode names (gpufleet.core.sharing is their one definition).
WHOLE, MIG, HAMI = sharing.WHOLE.name, sharing.MIG.name, sharing.HAMI.name
MODES = sharing.NAMES
# e.g. 1g.10gb, 3g.40gb, 7g.80gb, 1g.24gb+me
MIG_PROFILE = re.compile(r"(?P<slices>[1-7])g\.(?P<mem>[0-9]+)gb(\+me)?")  # always fullmatch (no "\n" tail)
# An A100/H100 has 7 compute slices; a MIG instance's share of the GPU is slices / 7.
MIG_COMPUTE_SLICES = 7
WEIGHT_QUANTUM = Decimal("0.0001")


def resource_name(mode: str, mig_profile: str = "") -> str:
    """The extended resource a pod asks for to get one unit of this flavor."""
    return sharing.get(mode).resource(mig_profile)


def default_weight(mode: str, mig_profile: str = "", memory_percent: int | None = None,
                   cores_percent: int | None = None) -> Decimal:
    """GPU-equivalents of one unit: 1 for a whole GPU; compute slices / 7 for MIG; the larger of the
    memory and core shares for HAMi (a share that pins 50% of memory blocks half a GPU, whatever
    its compute use)."""
    if mode == WHOLE:
        return Decimal(1)
    if mode == MIG:
        match = MIG_PROFILE.fullmatch(mig_profile)
        if not match:
            raise ValueError(f"not a MIG profile: {mig_profile!r} (expected like 3g.40gb)")
        return (Decimal(match["slices"]) / MIG_COMPUTE_SLICES).quantize(WEIGHT_QUANTUM)
    if mode == HAMI:
        share = max(memory_percent or 0, cores_percent or 0)
        if not 0 < share <= 100:
            raise ValueError("a HAMi flavor needs a memory or core percentage between 1 and 100")
        return (Decimal(share) / 100).quantize(WEIGHT_QUANTUM)
    raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")


def units_per_gpu(weight: Decimal) -> int:
    """How many units of a flavor one physical GPU yields (7 x 1g MIG instances, 4 x 25% HAMi shares)."""
    if weight <= 0:
        return 0
    # Weights are quantised (1g = 0.1429), so 1 / weight can fall just short of a whole number
    # (6.998): round to hundredths before flooring.
    return int((Decimal(1) / weight).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def covered_resources(mode: str, mig_profile: str = "", memory_percent: int | None = None,
                      cores_percent: int | None = None) -> list[str]:
    """Every extended resource a pod of this flavor requests. The first is the unit counted by quota;
    HAMi shares also request core and memory percentages, which the ClusterQueue must cover too."""
    names = [resource_name(mode, mig_profile)]
    # A share resource is covered when the flavor sets its amount (per_unit in scheduling.inputs).
    amounts = {HAMI_CORES: cores_percent, HAMI_MEMORY_PERCENT: memory_percent}
    names.extend(r for r in sharing.get(mode).share_resources if amounts.get(r))
    return names


HAMI_CORES = sharing.HAMI_CORES
HAMI_MEMORY_PERCENT = sharing.HAMI_MEMORY_PERCENT
