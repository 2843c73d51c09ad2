"""The GPU sharing modes: the one place that says what a mode is.

A *sharing mode* is how a pod gets a GPU: a whole card, a MIG instance (a hardware partition) or a HAMi share
(a software-enforced fraction). Everything the platform needs to know about a mode lives in its
`SharingMode` entry: the extended resources that select it, the one a quota counts, which scheduler binds its
pods, how DCGM/HAMi series are attributed to it when metering, the node labels its pools carry, the words
people read, its order and the trust levels that get it by default. The catalogue, the tenant isolation
policy, the routing policies, the node pools and metering all read this registry, so adding a mode is one
entry here plus the mode's own genuinely new code (its weight rule, its metering query if the identity is
new); nothing else lists the modes.

Adding a mode: its entry here (appended to MODES), then the mode's own code where it has any --
`scheduling.catalog.rules.default_weight` (its GPU-equivalents per unit), billing.metering's queries when its
metering identity is new (`usage`, `promql`, and idle detection in `scheduling.fleetops.measure`), the
simulator's scenario schema (`scheduling/simulator/scenario.py`, which may not import this), and the
migrations `makemigrations` writes for the new choice (plus a data migration if existing trust-level
policies should allow it). Flavor fields of its own (like a MIG profile) are validated in
`scheduling.actions`; capacity Karpenter cannot see goes in `scheduling.nodepools.render.overlay_capacity`.

Pure: no Django, no app imports (gpufleet.core is the bottom layer).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

# The node label every GPU node and every GPU pod's nodeSelector carries, valued with the mode's name
# (scheduling.nodepools renders it on pools and ResourceFlavors; scheduling.routing sets it on pods).
GPU_MODE_LABEL = "gpufleet.io/gpu-mode"

# Schedulers that bind GPU pods (their schedulerName).
KAI_SCHEDULER = "kai-scheduler"
HAMI_SCHEDULER = "hami-scheduler"

# How metering attributes TSDB series to a mode (billing.metering): dcgm-exporter's per-GPU series without a
# MIG profile, its per-instance series with one (`GPU_I_PROFILE`), or HAMi's per-share vGPU series.
DCGM_GPU = "dcgm-gpu"
DCGM_MIG_INSTANCE = "dcgm-mig-instance"
HAMI_SHARE = "hami-share"

# Trust levels (tenants.models.TrustLevel values), least trusted first.
UNTRUSTED, STANDARD, TRUSTED = "untrusted", "standard", "trusted"


@dataclass(frozen=True)
class SharingMode:
    """One GPU sharing mode and everything it means to the platform."""

    name: str  # stored value (Flavor.mode, AllocationPolicy.allowed_modes) and the gpu-mode label value
    choice_label: str  # the database choice's label ("Whole GPU")
    title: str  # plural heading on the isolation page ("Whole GPUs")
    description: str  # what a tenant gets, in one sentence (the isolation page)
    unit_hours: str  # what one unit-hour is called on billing pages
    # Extended resources (fnmatch patterns) whose presence in a pod selects this mode; the tenant
    # isolation policy refuses them to a tenant without the mode, routing keys the scheduler on them.
    resource_patterns: tuple[str, ...]
    # The resource a quota counts for one unit ("{profile}" is the flavor's MIG profile).
    counted_resource: str
    # Further resources a unit requests beyond the counted one (HAMi's core / memory percentages).
    share_resources: tuple[str, ...]
    scheduler: str  # KAI_SCHEDULER or HAMI_SCHEDULER
    metering: str  # DCGM_GPU, DCGM_MIG_INSTANCE or HAMI_SHARE
    # Node labels a pool of this mode carries besides GPU_MODE_LABEL (pairs: the entry stays hashable).
    extra_node_labels: tuple[tuple[str, str], ...]
    default_trust_levels: tuple[str, ...]  # trust levels allowed this mode by default (seeded policy rows)

    def resource(self, mig_profile: str = "") -> str:
        """The extended resource a pod asks for to get one unit of a flavor of this mode."""
        return self.counted_resource.format(profile=mig_profile)

    @property
    def node_labels(self) -> dict[str, str]:
        """Every label a node of this mode carries that says so (the mode label and the mode's own)."""
        return {GPU_MODE_LABEL: self.name, **dict(self.extra_node_labels)}

    def selects(self, resource: str) -> bool:
        return any(fnmatch.fnmatchcase(resource, p) for p in self.resource_patterns)


# HAMi's resource names are its chart defaults (reference dcgm/hami.md; scheduling.prerequisites pins them);
# MIG uses the NVIDIA device plugin's `mixed` strategy names.
GPU_RESOURCE = "nvidia.com/gpu"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"

WHOLE = SharingMode(
    name="whole", choice_label="Whole GPU", title="Whole GPUs",
    description="a GPU per pod (nvidia.com/gpu): nothing on the device is shared with another tenant.",
    unit_hours="GPU-hours",
    resource_patterns=(GPU_RESOURCE,), counted_resource=GPU_RESOURCE, share_resources=(),
    scheduler=KAI_SCHEDULER, metering=DCGM_GPU, extra_node_labels=(),
    # A whole GPU per pod: no GPU memory, cache or SM is shared with anyone else.
    default_trust_levels=(UNTRUSTED, STANDARD, TRUSTED),
)
MIG = SharingMode(
    name="mig", choice_label="MIG instance", title="MIG instances",
    description="a hardware-partitioned slice of an A100/H100 (nvidia.com/mig-<profile>): own SMs, "
                "cache slices and memory; the driver and the node are shared.",
    unit_hours="MIG instance-hours",
    resource_patterns=("nvidia.com/mig-*",), counted_resource="nvidia.com/mig-{profile}", share_resources=(),
    scheduler=KAI_SCHEDULER, metering=DCGM_MIG_INSTANCE, extra_node_labels=(),
    # MIG slices are partitioned in hardware (own SMs, L2 slices, memory controllers, fault domain).
    default_trust_levels=(STANDARD, TRUSTED),
)
HAMI = SharingMode(
    name="hami", choice_label="HAMi share", title="HAMi shares",
    description="part of a GPU (nvidia.com/gpumem, gpumem-percentage, gpucores): limits are enforced "
                "in software by a CUDA-interposing library, so only trusted tenants get them.",
    unit_hours="GPU share-hours",
    # Whole GPUs and HAMi vGPUs are both counted as nvidia.com/gpu; HAMi's own resources tell them apart.
    resource_patterns=(HAMI_MEMORY, HAMI_MEMORY_PERCENT, HAMI_CORES), counted_resource=GPU_RESOURCE,
    share_resources=(HAMI_CORES, HAMI_MEMORY_PERCENT),
    scheduler=HAMI_SCHEDULER, metering=HAMI_SHARE,
    # HAMi's device plugin runs where the chart's default key `gpu: "on"` is (the HAMi release's
    # devicePlugin.nvidiaNodeSelector). A HAMi node's GPUs are HAMi's alone: the GPU operator's own device
    # plugin would advertise the same `nvidia.com/gpu` and hand out whole cards beside HAMi's shares; the
    # operator skips a node labelled so (gpu-operator's per-node `nvidia.com/gpu.deploy.<operand>` labels).
    extra_node_labels=(("gpu", "on"), ("nvidia.com/gpu.deploy.device-plugin", "false")),
    # HAMi shares a GPU with a CUDA-interposing library: limits are software-enforced.
    default_trust_levels=(TRUSTED,),
)

# Every mode, in the platform's order: Kueue tries a tenant's flavors in it, YAML and the API list modes in
# it, pages show them in it. A new mode is appended here. A pod asking for resources of several modes gets
# the latest (scheduling.routing.gpu_mode_rules): a HAMi share also asks for `nvidia.com/gpu`.
MODES: tuple[SharingMode, ...] = (WHOLE, MIG, HAMI)
NAMES: tuple[str, ...] = tuple(m.name for m in MODES)
_BY_NAME = {m.name: m for m in MODES}
TRUST_LEVELS: tuple[str, ...] = (UNTRUSTED, STANDARD, TRUSTED)


def get(name: str) -> SharingMode:
    """The mode called `name`; KeyError for an unknown one (callers validate names with `NAMES` first)."""
    return _BY_NAME[name]


def position(name: str) -> int:
    """The mode's place in `MODES` (sort key)."""
    return NAMES.index(name)


def ordered(names: Iterable[str]) -> list[str]:
    """Mode names in the registry's order, unknown names dropped."""
    chosen = set(names)
    return [n for n in NAMES if n in chosen]


def choices() -> list[tuple[str, str]]:
    """(value, label) pairs for a database or form choice field of modes."""
    return [(m.name, m.choice_label) for m in MODES]


def mode_of_resource(resource: str) -> str | None:
    """The mode a pod's extended resource asks for, or None if it selects no mode."""
    return next((m.name for m in MODES if m.selects(resource)), None)


# What the modes' quotas count, as patterns (a MIG instance of any profile): GPUs in a node's capacity or a
# pod's requests.
_COUNTED = tuple(dict.fromkeys(m.counted_resource.format(profile="*") for m in MODES))


def counts_gpus(resource: str) -> bool:
    """Whether `resource` is a unit some mode's quota counts (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`)."""
    return any(fnmatch.fnmatchcase(resource, p) for p in _COUNTED)


def default_modes() -> dict[str, frozenset[str]]:
    """The modes each trust level gets by default (the seed of AllocationPolicy rows)."""
    return {level: frozenset(m.name for m in MODES if level in m.default_trust_levels) for level in TRUST_LEVELS}


def by_metering(identity: str) -> SharingMode:
    """The one mode whose usage is measured from series of `identity` (DCGM_GPU, ...)."""
    (mode,) = (m for m in MODES if m.metering == identity)
    return mode


def scheduled_by(scheduler: str) -> tuple[SharingMode, ...]:
    return tuple(m for m in MODES if m.scheduler == scheduler)
