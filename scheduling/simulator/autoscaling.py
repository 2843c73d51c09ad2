"""Inference traffic and the autoscalers that size an endpoint's replicas.

Signals (what KEDA/HPA would read):
* duty-cycle -- the GPU's busy fraction. HPA's desired = ceil(ready * duty / target). Duty saturates at 1.0
  whether 10 or 100 requests wait, so each sync grows the endpoint by at most 1/target (the HPA trap).
* kv-cache -- KV-cache use = requests in flight / (replicas * concurrency); it saturates at 1.0 as well.
* queue-depth -- requests waiting (KEDA AverageValue): desired = ceil(waiting / target); sees the backlog.
Scale-up is immediate; scale-down waits until desired has stayed below the current count for `cooldown_s`
(HPA stabilisation / KEDA cooldown); scale to zero only with min_replicas 0; a pre-warm window raises the
minimum.
"""

from __future__ import annotations

import math
import random

from .model import Endpoint, Traffic


def rate_at(traffic: Traffic, t: float, bursts: list[tuple[float, float]]) -> float:
    """Requests per second at time t (bursts: sorted (start, end) windows)."""
    hour = (t / 3600.0) % 24.0
    if traffic.hourly_rps:
        base = traffic.hourly_rps[int(t // 3600) % len(traffic.hourly_rps)]
    else:
        phase = 2 * math.pi * (hour - traffic.peak_hour) / 24
        base = traffic.base_rps * (1.0 + traffic.diurnal_amplitude * math.cos(phase))
    for start, end in bursts:
        if start <= t < end:
            return base * traffic.burst_multiplier
        if start > t:
            break
    return max(0.0, base)


def burst_windows(traffic: Traffic, horizon_s: float, rng: random.Random) -> list[tuple[float, float]]:
    if traffic.bursts_per_day <= 0:
        return []
    count = max(1, round(traffic.bursts_per_day * horizon_s / 86400))
    starts = sorted(rng.uniform(0, max(0.0, horizon_s - traffic.burst_duration_s)) for _ in range(count))
    return [(s, s + traffic.burst_duration_s) for s in starts]


def poisson(lam: float, rng: random.Random) -> int:
    if lam <= 0:
        return 0
    if lam > 30:  # normal approximation: exact enough for counts this large, and fast
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def minimum_at(ep: Endpoint, t: float) -> int:
    hour = (t / 3600.0) % 24.0
    floor = ep.min_replicas
    for w in ep.prewarm:
        inside = w.start_hour <= hour < w.end_hour if w.start_hour <= w.end_hour else (
            hour >= w.start_hour or hour < w.end_hour)
        if inside:
            floor = max(floor, w.replicas)
    return floor


def desired_replicas(ep: Endpoint, *, ready: int, waiting: float, duty: float, kv: float) -> int:
    """The replica count the signal asks for, before min/max and cooldown."""
    if ep.signal == "queue-depth":
        return math.ceil(waiting / max(ep.target, 1e-9)) if waiting > 0 else 0
    if ready == 0:
        return 1 if waiting > 0 else 0  # KEDA's activation: scale from zero on any waiting request
    metric = min(1.0, duty) if ep.signal == "duty-cycle" else min(1.0, kv)
    return math.ceil(ready * metric / max(ep.target, 1e-9) - 1e-9)
