"""A slow, obvious Python model of the measuring rule, run over the raw import lines.

Used only to cross-check the TSDB queries on randomised timelines: it works on individual samples
(what the real collector must never do for a month) and shares no code with `billing.metering`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal
from itertools import pairwise

LINE = re.compile(r'^(?P<name>[A-Za-z_:][\w:]*)\{(?P<labels>.*)\} (?P<value>\S+) (?P<ts>\d+)$')
LABEL = re.compile(r'(\w+)="([^"]*)"')
OLD = {"pod_namespace": "namespace", "pod_name": "pod", "container_name": "container", "uuid": "UUID"}


def _parse(lines: Iterable[str]):
    for line in lines:
        m = LINE.match(line)
        assert m, line
        labels = {OLD.get(k, k): v for k, v in LABEL.findall(m["labels"])}
        yield m["name"], labels, Decimal(m["value"]), int(m["ts"])  # milliseconds


def _held(slots: set[int], n: int) -> set[int]:
    ordered = sorted(slots)
    held = set(ordered)
    for a, b in pairwise(ordered):
        if b - a <= n + 1:
            held.update(range(a + 1, b))
    return held


def expected(lines: Iterable[str], *, interval: int, n: int, usage_metric: str) -> dict:
    """{(tenant, kind, model, profile, hour_start_unix): seconds (Decimal)}"""
    dcgm: dict[tuple, set[int]] = defaultdict(set)
    hami_devices: dict[str, set[int]] = defaultdict(set)
    limits: dict[str, dict[int, Decimal]] = defaultdict(dict)
    device_type: dict[str, str] = {}
    hami_slots: dict[tuple, set[int]] = defaultdict(set)
    memory: dict[tuple, dict[int, Decimal]] = defaultdict(dict)
    cores: dict[tuple, dict[int, Decimal]] = defaultdict(dict)
    for name, labels, value, ts in _parse(lines):
        slot = ts // (interval * 1000) + 1  # the slot [k*s - s, k*s) holding this sample (a gauge holds from t on)
        ns, pod = labels.get("namespace", ""), labels.get("pod", "")
        tenant_ok = ns.startswith("tenant-") and len(ns) > len("tenant-") and pod != ""
        if name == usage_metric and tenant_ok:
            key = (ns, pod, labels.get("container", ""), labels["UUID"], labels.get("GPU_I_ID", ""),
                   labels.get("GPU_I_PROFILE", ""), labels["modelName"])
            dcgm[key].add(slot)
        elif name == "hami_gpu_memory_limit_bytes":
            hami_devices[labels["device_uuid"]].add(slot)
            limits[labels["device_uuid"]][slot] = value
            device_type[labels["device_uuid"]] = labels["device_type"]
        elif name in ("hami_vgpu_memory_allocated_bytes", "hami_vgpu_core_allocated_ratio") and tenant_ok:
            key = (ns, pod, labels["container_index"], labels["device_uuid"])
            hami_slots[key].add(slot)
            (memory if name.startswith("hami_vgpu_memory") else cores)[key][slot] = value

    out: dict[tuple, Decimal] = defaultdict(Decimal)

    def hour(slot: int) -> int:
        return (slot * interval - 1) // 3600 * 3600

    for (ns, _pod, _c, uuid, _gid, profile, model), slots in dcgm.items():
        for k in _held(slots, n):
            if any(j in hami_devices.get(uuid, ()) for j in range(k - n - 1, k + n + 2)):
                continue
            out[(ns.removeprefix("tenant-"), "mig" if profile else "whole", model, profile, hour(k))] += interval

    def last(values: dict[int, Decimal], k: int) -> Decimal | None:
        for j in range(k, k - n - 1, -1):
            if j in values:
                return values[j]
        return None

    for key, slots in hami_slots.items():
        ns, _pod, _ci, uuid = key
        for k in _held(slots, n):
            parts = []
            mem, limit, core = last(memory[key], k), last(limits[uuid], k), last(cores[key], k)
            if mem is not None and limit:
                parts.append(mem / limit)
            if core is not None:
                parts.append(core / 100)
            if parts:
                out[(ns.removeprefix("tenant-"), "hami", device_type[uuid], "", hour(k))] += max(parts) * interval
    return {k: v for k, v in out.items() if v}
