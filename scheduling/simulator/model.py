"""The simulated fleet and its demand, as plain dataclasses (the scenario file parses into these).

Units: a flavor's *unit* is what a quota counts and a pod requests -- a whole GPU, one MIG instance of the
flavor's profile, or one HAMi share. `slices_per_gpu` converts units to GPU-equivalents for GPU-hours.
Times are seconds from the start of the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

PROVISIONING_DELAY_S: dict[str, tuple[float, float]] = {
    # Time from a pending pod to a Ready GPU node (issue 13 defaults; docs/simulator.md).
    "karpenter": (45.0, 60.0),
    "cluster-autoscaler": (90.0, 120.0),
    "none": (0.0, 0.0),  # a static pool: never grows
}


@dataclass(frozen=True)
class Flavor:
    name: str
    mode: str = "whole"  # whole | mig | hami
    slices_per_gpu: int = 1


@dataclass(frozen=True)
class NodePool:
    name: str
    flavor: str
    gpus_per_node: int = 8
    nodes: int = 0  # nodes present at t=0
    gpu_limit: int = 0  # the pool never holds more GPUs than this (Karpenter `limits`)
    provisioner: str = "karpenter"
    consolidation_policy: str = "WhenEmpty"  # WhenEmpty | WhenEmptyOrUnderutilized
    consolidate_after_s: float = 3600.0
    nodes_per_domain: int = 0  # NVLink/topology domain size in nodes; 0 = one domain per node
    price_per_node_hour: Decimal = Decimal(0)
    initial_used: tuple[int, ...] = ()  # units held at t=0 by work outside the simulation, per node
    initial_used_until_s: float = 0.0
    cluster: str | None = None  # reserved for several host clusters (not modelled yet)


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None = None
    weight: float = 1.0


@dataclass(frozen=True)
class Quota:
    flavor: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class Tenant:
    name: str
    cohort: str | None = None
    weight: float = 1.0
    quotas: tuple[Quota, ...] = ()


@dataclass(frozen=True)
class Preemption:
    """The ClusterQueue preemption block the platform renders (scheduling/render.py)."""

    reclaim_within_cohort: str = "Any"  # Never | LowerPriority | Any
    borrow_within_cohort: str = "LowerPriority"  # Never | LowerPriority
    within_cluster_queue: str = "LowerPriority"  # Never | LowerPriority


@dataclass(frozen=True)
class Policies:
    gang: bool = True  # all-or-nothing placement (KAI gang / Kueue waitForPodsReady) vs pod-by-pod
    fair_sharing: bool = False
    preemption: Preemption = field(default_factory=Preemption)


@dataclass(frozen=True)
class JobSpec:
    id: int
    tenant: str
    flavor: str
    submit_s: float
    pods: int
    units_per_pod: int
    duration_s: float
    priority: int = 0
    single_domain: bool = False  # must stay in one NVLink/topology domain
    max_nodes: int = 0  # gang placement spreads the pods over at most this many nodes (0 = any)

    @property
    def units(self) -> int:
        return self.pods * self.units_per_pod


@dataclass(frozen=True)
class Traffic:
    base_rps: float = 1.0
    diurnal_amplitude: float = 0.0  # 0..1: rate = base * (1 + a*cos(2*pi*(h - peak)/24))
    peak_hour: float = 14.0
    bursts_per_day: float = 0.0
    burst_multiplier: float = 1.0
    burst_duration_s: float = 600.0
    hourly_rps: tuple[float, ...] = ()  # recorded traffic: replaces the shape above, hour by hour


@dataclass(frozen=True)
class Prewarm:
    start_hour: float
    end_hour: float
    replicas: int


@dataclass(frozen=True)
class Endpoint:
    name: str
    tenant: str
    pool: str
    units_per_pod: int = 1
    pods_per_replica: int = 1
    model_load_s: float = 120.0
    min_replicas: int = 1
    max_replicas: int = 4
    cooldown_s: float = 300.0
    polling_s: float = 30.0
    signal: str = "queue-depth"  # duty-cycle | queue-depth | kv-cache
    target: float = 5.0  # duty-cycle/kv-cache: a fraction; queue-depth: waiting requests per replica
    gang: bool = False  # replica pods placed all-or-nothing
    capacity_rps: float = 1.0  # requests per second one ready replica serves
    concurrency: int = 16  # requests in flight per replica (its KV-cache slots)
    timeout_s: float = 60.0  # a request still waiting after this is dropped (timed out)
    base_ttft_s: float = 0.3
    prewarm: tuple[Prewarm, ...] = ()
    traffic: Traffic = field(default_factory=Traffic)


@dataclass(frozen=True)
class Scenario:
    name: str
    days: float
    flavors: tuple[Flavor, ...]
    pools: tuple[NodePool, ...]
    cohorts: tuple[Cohort, ...]
    tenants: tuple[Tenant, ...]
    jobs: tuple[JobSpec, ...]
    endpoints: tuple[Endpoint, ...] = ()
    policies: Policies = field(default_factory=Policies)
    currency: str = "USD"
    generators: tuple[dict, ...] = ()  # workload generators, expanded into `jobs` by scenario.expand()

    @property
    def horizon_s(self) -> float:
        return self.days * 86400.0
