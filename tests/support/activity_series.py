"""DCGM activity series (engine, DRAM, GPU_UTIL, FB_USED) for a `dcgm_series.Timeline`.

`Activity` segments say what an allocation did when: from `start` (inclusive) to `end` (exclusive) it
reports `engine` and `dram` (0..1, profiling metrics; None = the exporter has no profiling metrics),
`util` (0..100, DCGM_FI_DEV_GPU_UTIL; None = not reported, as for MIG) and `fb_mib` (FB_USED). Samples
are written at exactly the scrape instants (and with the replicas, label scheme and missed scrapes) of
the GPU's holds, so an allocation's activity and its FB_USED usage metric come from the same scrapes,
as they do from one dcgm-exporter. `device_lines` writes device-level activity with no pod labels (the
series HAMi-shared GPUs have).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from tests.support.dcgm_series import Gpu, HamiGpu, Timeline, _gpu_labels, _held_at, _labels

ENGINE, DRAM, UTIL, FB = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_GPU_UTIL",
                          "DCGM_FI_DEV_FB_USED")


@dataclass(frozen=True)
class Activity:
    start: datetime
    end: datetime
    engine: float | None = 0.0
    dram: float | None = 0.0
    util: float | None = None
    fb_mib: int = 30211


def _segment(segments: tuple[Activity, ...], t: int) -> Activity | None:
    for seg in segments:
        if int(seg.start.timestamp()) <= t < int(seg.end.timestamp()):
            return seg
    return None


def _values(seg: Activity) -> list[tuple[str, float]]:
    out = [(FB, seg.fb_mib)]
    if seg.engine is not None:
        out.append((ENGINE, seg.engine))
    if seg.dram is not None:
        out.append((DRAM, seg.dram))
    if seg.util is not None:
        out.append((UTIL, seg.util))
    return out


def gpu_activity_lines(timeline: Timeline, gpu: Gpu, segments: tuple[Activity, ...]) -> Iterator[str]:
    """Activity of a GPU's holders (FB_USED included: do not also emit `dcgm_series.gpu_lines`)."""
    for t in timeline.scrape_times(timeline.start, timeline.end):
        holder = _held_at(gpu.holds, t, timeline)
        seg = _segment(segments, t)
        if holder is None or seg is None:
            continue
        base = _labels(_gpu_labels(gpu, holder))
        for replica in gpu.replicas:
            extra = "," + _labels(replica.items()) if replica else ""
            for metric, value in _values(seg):
                yield f"{metric}{{{base}{extra}}} {value} {timeline.stamp_ms(t)}"


def device_lines(timeline: Timeline, gpu: HamiGpu, model_name: str, segments: tuple[Activity, ...]) -> Iterator[str]:
    """Device-level DCGM activity of a HAMi-managed GPU (no pod labels)."""
    base = _labels([("gpu", str(gpu.index)), ("UUID", gpu.uuid), ("modelName", model_name),
                    ("Hostname", gpu.node)])
    for t in timeline.scrape_times(timeline.start, timeline.end):
        seg = _segment(segments, t)
        if seg is None:
            continue
        for metric, value in _values(seg):
            yield f'{metric}{{{base},instance="{gpu.node}:9400",job="dcgm-exporter"}} {value} {timeline.stamp_ms(t)}'
