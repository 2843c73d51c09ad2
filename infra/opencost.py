"""OpenCost allocation client: `/allocation/compute`, both response shapes, NaN/null safe, costs as Decimal.

Shapes (see ../shared/reference/opencost/opencost.md):
  * 2024 (≈ v1.112): GPU request/usage averages are top-level keys (`gpuRequestAverage`, `gpuUsageAverage`);
  * newer (≥ 1.11x, 2025-26): those move into a `gpuAllocation` object (with `gpuModel`, `gpuUUID`,
    `isGPUShared`, ...); new top-level keys (`cpuCoreLimitAverage`, `*CostIdle`) appear.
Both are parsed into the same `Allocation`; a key that is missing, `null`, `NaN` or infinite becomes `None`
(OpenCost writes NaN as null in current releases, but older ones and proxies emit bare `NaN`).
Numbers go through `str()` into `Decimal`: OpenCost rounds to 5 decimals, and the shortest float repr
keeps exactly those digits.

Failures: HTTP 5xx, timeouts and connection errors are retried a bounded number of times (`attempts`,
default 3, short back-off) because the query is read-only; if they persist → `TransientError`.
HTTP 4xx, a non-JSON answer or an envelope whose `code` is not 200 → `PermanentError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import requests

from infra import http
from infra.errors import PermanentError, TransientError

OPENCOST_TIMEOUTS = http.Timeouts(connect=3.05, read=60.0)
SHAPE_2024, SHAPE_GPU_ALLOCATION = "2024", "gpuAllocation"


def decimal_or_none(raw: Any) -> Decimal | None:
    """A finite Decimal, or None for missing/null/NaN/Inf/non-numeric values."""
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, float) and not math.isfinite(raw):
        return None
    try:
        value = Decimal(str(raw))
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def _time(raw: Any) -> datetime | None:
    if not isinstance(raw, str) or not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Allocation:
    name: str
    shape: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    window_start: datetime | None = None
    window_end: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    minutes: Decimal | None = None
    gpu_count: Decimal | None = None
    gpu_hours: Decimal | None = None
    gpu_cost: Decimal | None = None
    gpu_cost_adjustment: Decimal | None = None
    gpu_cost_idle: Decimal | None = None
    gpu_efficiency: Decimal | None = None
    gpu_request_average: Decimal | None = None
    gpu_usage_average: Decimal | None = None
    gpu_model: str | None = None
    gpu_uuid: str | None = None
    gpu_device: str | None = None
    gpu_shared: bool | None = None
    cpu_cost: Decimal | None = None
    ram_cost: Decimal | None = None
    pv_cost: Decimal | None = None
    network_cost: Decimal | None = None
    load_balancer_cost: Decimal | None = None
    shared_cost: Decimal | None = None
    external_cost: Decimal | None = None
    total_cost: Decimal | None = None

    @property
    def namespace(self) -> str | None:
        value = self.properties.get("namespace")
        return value if isinstance(value, str) else None

    @property
    def is_idle(self) -> bool:
        return self.name == "__idle__"


def parse_allocation(name: str, raw: Mapping[str, Any]) -> Allocation:
    gpu = raw.get("gpuAllocation")
    gpu = gpu if isinstance(gpu, Mapping) else None
    window = raw.get("window") if isinstance(raw.get("window"), Mapping) else {}
    properties = raw.get("properties") if isinstance(raw.get("properties"), Mapping) else {}

    def number(key: str) -> Decimal | None:
        return decimal_or_none(raw.get(key))

    def gpu_number(key: str) -> Decimal | None:
        # Newer releases report these only inside gpuAllocation (top-level is json:"-").
        nested = decimal_or_none(gpu.get(key)) if gpu is not None else None
        return nested if nested is not None else number(key)

    shared = gpu.get("isGPUShared") if gpu is not None else None
    return Allocation(
        name=str(raw.get("name") or name),
        shape=SHAPE_GPU_ALLOCATION if "gpuAllocation" in raw else SHAPE_2024,
        properties=dict(properties),
        window_start=_time(window.get("start")), window_end=_time(window.get("end")),
        start=_time(raw.get("start")), end=_time(raw.get("end")),
        minutes=number("minutes"),
        gpu_count=number("gpuCount"), gpu_hours=number("gpuHours"), gpu_cost=number("gpuCost"),
        gpu_cost_adjustment=number("gpuCostAdjustment"), gpu_cost_idle=number("gpuCostIdle"),
        gpu_efficiency=number("gpuEfficiency"),
        gpu_request_average=gpu_number("gpuRequestAverage"), gpu_usage_average=gpu_number("gpuUsageAverage"),
        gpu_model=(gpu.get("gpuModel") or None) if gpu is not None else None,
        gpu_uuid=(gpu.get("gpuUUID") or None) if gpu is not None else None,
        gpu_device=(gpu.get("gpuDevice") or None) if gpu is not None else None,
        gpu_shared=shared if isinstance(shared, bool) else None,
        cpu_cost=number("cpuCost"), ram_cost=number("ramCost"), pv_cost=number("pvCost"),
        network_cost=number("networkCost"), load_balancer_cost=number("loadBalancerCost"),
        shared_cost=number("sharedCost"), external_cost=number("externalCost"), total_cost=number("totalCost"),
    )


def parse_response(body: Any) -> list[dict[str, Allocation]]:
    """The envelope `{"code": 200, "data": [ {name: allocation}, ... ]}` → one dict per step."""
    if not isinstance(body, Mapping):
        raise PermanentError("OpenCost answer is not a JSON object")
    code = body.get("code", 200)
    if code != 200:
        raise PermanentError(f"OpenCost returned code {code}: {body.get('message') or body.get('status')}")
    sets = body.get("data")
    if sets is None:
        return []
    if isinstance(sets, Mapping):  # some versions return one set without the list
        sets = [sets]
    if not isinstance(sets, list):
        raise PermanentError("OpenCost answer has no data list")
    parsed = []
    for allocation_set in sets:
        if allocation_set is None:
            parsed.append({})
            continue
        if not isinstance(allocation_set, Mapping):
            raise PermanentError("OpenCost allocation set is not an object")
        parsed.append({name: parse_allocation(name, raw) for name, raw in allocation_set.items()
                       if isinstance(raw, Mapping)})
    return parsed


def _rfc3339(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("OpenCost windows need timezone-aware datetimes")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class OpenCostClient:
    """`base_url` is the API root (`http://opencost:9003`) or the UI's `/model` prefix."""

    def __init__(self, base_url: str, *, session: requests.Session | None = None,
                 timeouts: http.Timeouts = OPENCOST_TIMEOUTS, attempts: int = 3, backoff: float = 0.25) -> None:
        if not base_url:
            raise PermanentError("no OpenCost URL configured (GPUFLEET_OPENCOST_URL)")
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        # Retries are ours (counted, including 500s); the adapter must not multiply them.
        self.session = session or http.session(timeouts, retries=0)
        self.timeouts = timeouts
        self.attempts = attempts
        self.backoff = backoff

    def allocation_sets(self, start: datetime, end: datetime, *, aggregate: str = "namespace",
                        accumulate: bool = True, include_idle: bool = False, share_idle: bool = False,
                        step: str | None = None) -> list[dict[str, Allocation]]:
        if start >= end:
            raise ValueError("window start must be before its end")
        params = {
            "window": f"{_rfc3339(start)},{_rfc3339(end)}",
            "aggregate": aggregate,
            "accumulate": str(accumulate).lower(),
            "includeIdle": str(include_idle).lower(),
            "shareIdle": str(share_idle).lower(),
        }
        if step:
            params["step"] = step
        return parse_response(self._get("/allocation/compute", params))

    def allocation(self, start: datetime, end: datetime, **kwargs: Any) -> dict[str, Allocation]:
        """The accumulated allocation set for [start, end): {allocation name: Allocation}."""
        kwargs["accumulate"] = True
        merged: dict[str, Allocation] = {}
        for allocation_set in self.allocation_sets(start, end, **kwargs):
            merged.update(allocation_set)
        return merged

    def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            return http.retry_transient(lambda: self._once(path, params), attempts=self.attempts,
                                        pause=lambda attempt: self.backoff * (2**attempt))
        except TransientError as last:
            raise TransientError(f"OpenCost failed {self.attempts} times; last: {last}", delay=last.delay) from last

    def _once(self, path: str, params: dict[str, str]) -> Any:
        with http.network_errors_are_transient("OpenCost", timeout_delay=60, unreachable_delay=30):
            response = self.session.get(f"{self.base_url}{path}", params=params, timeout=self.timeouts.as_tuple())
        if response.status_code >= 500:
            raise TransientError(f"OpenCost server error {response.status_code}: {response.text[:200]}", delay=60)
        if response.status_code >= 400:
            raise PermanentError(f"OpenCost rejected the query ({response.status_code}): {response.text[:300]}")
        try:
            return response.json()  # Python's json accepts bare NaN/Infinity, which older OpenCosts emit
        except ValueError as exc:
            raise PermanentError("OpenCost did not answer with JSON") from exc
