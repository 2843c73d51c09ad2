"""Exporter-shaped series from a known allocation timeline (tests and `benchmarks/billing.py`).

Describe who held which GPU when — `Gpu` (a whole GPU or one MIG instance, as dcgm-exporter reports it)
with `Hold`s, and `HamiGpu` with `HamiShare`s — and `lines(...)` yields Prometheus import lines
(`name{labels} value timestamp_ms`) exactly as a scraper storing dcgm-exporter 4.x and the HAMi scheduler
would: one sample per scrape, at `phase` seconds after each interval boundary, labels in the exporter's
order, replica copies with their own `instance`/`job`/`prometheus_replica` labels.

A hold's samples are at t = start + phase + i·interval for every i with t < end, minus the indexes in
`missed`. So a hold [10:00, 10:05) at 30 s has 10 samples and is worth 300 s; one missed scrape in the
middle is bridged (still 300 s); a missed final scrape shortens it by one interval.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

IDLE_ABSENT, IDLE_EMPTY, IDLE_NONE = "absent", "empty", "none"
DRIVER = "570.124.06"


@dataclass(frozen=True)
class Hold:
    namespace: str
    pod: str
    start: datetime
    end: datetime
    container: str = "main"
    missed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Gpu:
    uuid: str
    model_name: str
    holds: tuple[Hold, ...] = ()
    index: int = 0
    hostname: str = "gpu-node-a"
    mig_profile: str = ""
    mig_id: str = ""
    idle: str = IDLE_ABSENT  # what the exporter prints when no pod holds it
    old_label_names: bool = False  # dcgm-exporter --use-old-namespace
    replicas: tuple[dict[str, str], ...] = ({"instance": "10.0.0.1:9400", "job": "dcgm-exporter"},)


@dataclass(frozen=True)
class HamiShare:
    namespace: str
    pod: str
    start: datetime
    end: datetime
    memory_bytes: int
    cores_percent: int
    container_index: int = 0
    missed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class HamiGpu:
    uuid: str
    device_type: str
    memory_bytes: int
    shares: tuple[HamiShare, ...] = ()
    node: str = "gpu-node-b"
    index: int = 0
    replicas: tuple[dict[str, str], ...] = ({"instance": "10.0.0.9:31993", "job": "hami-scheduler"},)


@dataclass
class Timeline:
    start: datetime  # series are emitted for [start, end)
    end: datetime
    interval: int = 30
    phase: int = 7  # seconds after each interval boundary the scrape happens
    usage_metric: str = "DCGM_FI_DEV_FB_USED"
    jitter_ms: tuple[int, ...] = ()  # per-scrape timestamp offsets (cycled), to model scrape jitter
    gpus: list[Gpu] = field(default_factory=list)
    hami: list[HamiGpu] = field(default_factory=list)

    def stamp_ms(self, t: int) -> int:
        """The stored timestamp of the scrape at t (unix seconds), jitter applied."""
        if not self.jitter_ms:
            return t * 1000
        index = (t - int(self.start.timestamp()) - self.phase) // self.interval
        return t * 1000 + self.jitter_ms[index % len(self.jitter_ms)]

    def scrape_times(self, start: datetime, end: datetime) -> Iterator[int]:
        """Scrape instants (unix seconds) in [start, end), on the timeline's phase."""
        base, first = int(self.start.timestamp()), int(start.timestamp())
        k = max(0, -(-(first - base - self.phase) // self.interval))
        last = int(end.timestamp())
        t = base + self.phase + k * self.interval
        while t < last:
            yield t
            t += self.interval


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def _gpu_labels(gpu: Gpu, holder: Hold | None) -> list[tuple[str, str]]:
    uuid_key = "uuid" if gpu.old_label_names else "UUID"
    pairs = [("gpu", str(gpu.index)), (uuid_key, gpu.uuid), ("pci_bus_id", f"00000000:{gpu.index + 24:02X}:00.0"),
             ("device", f"nvidia{gpu.index}"), ("modelName", gpu.model_name)]
    if gpu.mig_profile:
        pairs += [("GPU_I_PROFILE", gpu.mig_profile), ("GPU_I_ID", gpu.mig_id)]
    pairs += [("Hostname", gpu.hostname), ("DCGM_FI_DRIVER_VERSION", DRIVER)]
    names = ("container_name", "pod_name", "pod_namespace") if gpu.old_label_names else (
        "container", "namespace", "pod")
    if holder is not None:
        values = ((holder.container, holder.pod, holder.namespace) if gpu.old_label_names
                  else (holder.container, holder.namespace, holder.pod))
        pairs += list(zip(names, values, strict=True))
    elif gpu.idle == IDLE_EMPTY:
        pairs += [(name, "") for name in names]
    return pairs


def _held_at(holds: Iterable, t: int, timeline: Timeline):
    for hold in holds:
        start, end = int(hold.start.timestamp()), int(hold.end.timestamp())
        if start <= t < end:
            index = (t - start - timeline.phase) // timeline.interval
            return None if index in hold.missed else hold
    return None


def _missed_inside(holds: Iterable, t: int) -> bool:
    return any(int(h.start.timestamp()) <= t < int(h.end.timestamp()) for h in holds)


def gpu_lines(timeline: Timeline, gpu: Gpu) -> Iterator[str]:
    for t in timeline.scrape_times(timeline.start, timeline.end):
        holder = _held_at(gpu.holds, t, timeline)
        if holder is None and (_missed_inside(gpu.holds, t) or gpu.idle == IDLE_NONE):
            continue  # a missed scrape emits nothing at all
        base = _labels(_gpu_labels(gpu, holder))
        value = 30211 if holder else 0
        for replica in gpu.replicas:
            extra = _labels(replica.items())
            yield f"{timeline.usage_metric}{{{base}{',' + extra if extra else ''}}} {value} {timeline.stamp_ms(t)}"


def hami_lines(timeline: Timeline, gpu: HamiGpu) -> Iterator[str]:
    device = _labels([("node", gpu.node), ("device_uuid", gpu.uuid), ("device_index", str(gpu.index)),
                      ("device_type", gpu.device_type)])
    for t in timeline.scrape_times(timeline.start, timeline.end):
        for replica in gpu.replicas:
            extra = "," + _labels(replica.items()) if replica else ""
            yield f"hami_gpu_memory_limit_bytes{{{device}{extra}}} {gpu.memory_bytes} {timeline.stamp_ms(t)}"
            for share in gpu.shares:
                if _held_at((share,), t, timeline) is None:
                    continue
                labels = _labels([("namespace", share.namespace), ("node", gpu.node), ("pod", share.pod),
                                  ("container_index", str(share.container_index)), ("device_uuid", gpu.uuid)])
                yield f"hami_vgpu_memory_allocated_bytes{{{labels}{extra}}} {share.memory_bytes} {timeline.stamp_ms(t)}"
                yield f"hami_vgpu_core_allocated_ratio{{{labels}{extra}}} {share.cores_percent} {timeline.stamp_ms(t)}"


def lines(timeline: Timeline) -> Iterator[str]:
    for gpu in timeline.gpus:
        yield from gpu_lines(timeline, gpu)
    for hami in timeline.hami:
        yield from hami_lines(timeline, hami)
