"""Prometheus-API client for VictoriaMetrics or Prometheus: instant and range queries, parsed exactly.

Errors are classified so a Celery task knows whether to retry:
  * connection refused/reset, timeouts, HTTP 5xx, and API errors of type `timeout`/`unavailable`
    → `TransientError` (the query may well succeed later);
  * HTTP 4xx, `"status": "error"` with any other type (`bad_data`, `execution`, ...), and answers that
    are not a Prometheus API envelope → `PermanentError` (the query itself is wrong; retrying won't help).
A bounded number of immediate re-attempts (default 2 in total) is made for transient failures, because
queries are read-only; anything longer is the task's retry policy, not a sleep here.

Values arrive as strings ("1", "0.25", "NaN"); they are kept as `Decimal` so sums of exact counts stay
exact. Timestamps are seconds since the epoch, possibly fractional ("1767225600.5"), also `Decimal`.
VictoriaMetrics caches range results per query; `nocache=1` makes every query read the storage, so data
imported or back-filled after a first query is never hidden by the cache (billing re-collects windows).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any, NamedTuple

import requests

from infra import http
from infra.errors import PermanentError, TransientError

QUERY_TIMEOUTS = http.Timeouts(connect=3.05, read=120.0)
TRANSIENT_API_ERRORS = frozenset({"timeout", "unavailable", "canceled"})


class Sample(NamedTuple):
    # A tuple, not a dataclass: a month of billing parses ~4 x 10^5 of these, and a frozen dataclass's
    # __init__ cost more than the parsing itself.
    timestamp: Decimal  # seconds since the epoch, exactly as sent
    value: Decimal

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(float(self.timestamp), tz=UTC)


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    samples: tuple[Sample, ...]

    @property
    def value(self) -> Decimal:
        """The single value of an instant-vector element."""
        if len(self.samples) != 1:
            raise ValueError(f"series has {len(self.samples)} samples, not one")
        return self.samples[0].value


def _number(raw: Any, what: str) -> Decimal:
    try:
        return Decimal(str(raw))
    except (InvalidOperation, ValueError) as exc:
        raise PermanentError(f"metrics API returned a non-numeric {what}: {raw!r}") from exc


def _sample(pair: Any) -> Sample:
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        raise PermanentError(f"metrics API returned a malformed sample: {pair!r}")
    return Sample(timestamp=_number(pair[0], "timestamp"), value=_number(pair[1], "value"))


class _Decimals(dict[Any, Decimal]):
    """One Decimal per distinct key of one answer: an answer's range points share a few dozen int
    timestamps and, for counts, few value strings, and Decimal(...) per sample cost more than the rest of
    the parsing. Decimals are immutable, so sharing them changes nothing. Keyed by ints only (timestamps)
    or strings only (values): 1 and 1.0 would share a key but parse to different Decimals."""

    def __missing__(self, key: int | str) -> Decimal:
        value = self[key] = Decimal(key)
        return value


# A Sample from a (timestamp, value) tuple: what the NamedTuple's generated __new__ does, in C.
_new_sample = partial(tuple.__new__, Sample)


def _samples(pairs: Any, stamps: _Decimals | None = None, values: _Decimals | None = None) -> tuple[Sample, ...]:
    """All samples of a series. The shape both servers send ([number or string, string] pairs) takes a
    fast path with the same results (checked column-wise in C); VictoriaMetrics' int timestamps go through
    the per-answer caches `stamps` and `values`. Anything else is parsed, and refused, pair by pair by
    `_sample`."""
    if isinstance(pairs, list) and not pairs:
        return ()
    if isinstance(pairs, list) and set(map(type, pairs)) == {list} and set(map(len, pairs)) == {2}:
        times, texts = zip(*pairs, strict=True)
        kinds = set(map(type, times))
        if set(map(type, texts)) == {str} and kinds.issubset(_STAMP_TYPES):
            try:
                if kinds == {int}:
                    stamps = _Decimals() if stamps is None else stamps
                    values = _Decimals() if values is None else values
                    return tuple(map(_new_sample, zip(map(stamps.__getitem__, times),
                                                      map(values.__getitem__, texts), strict=True)))
                return tuple([_new_sample((Decimal(t) if t.__class__ is int else Decimal(str(t)), Decimal(v)))
                              for t, v in pairs])
            except (InvalidOperation, ValueError):
                pass
    return tuple(_sample(p) for p in pairs)


_STAMP_TYPES = (int, float, str)


def parse_result(data: Any) -> list[Series]:
    """Turn the `data` member of a query answer into series (vector, matrix and scalar)."""
    if not isinstance(data, dict) or "resultType" not in data:
        raise PermanentError("metrics API answer has no data.resultType")
    kind, result = data["resultType"], data.get("result")
    if kind == "vector":
        return [Series(dict(item.get("metric") or {}), (_sample(item["value"]),)) for item in result or []]
    if kind == "matrix":
        stamps, values = _Decimals(), _Decimals()  # shared by the answer's series
        return [
            Series(dict(item.get("metric") or {}), _samples(item.get("values") or [], stamps, values))
            for item in result or []
        ]
    if kind == "scalar":
        return [Series({}, (_sample(result),))]
    raise PermanentError(f"metrics API returned an unsupported result type {kind!r}")


def _unix(moment: datetime | int | Decimal) -> str:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise ValueError("query times must be timezone-aware (UTC)")
        return format(Decimal(int(moment.timestamp() * 1_000_000)) / 1_000_000, "f")
    return str(moment)


PROBE_TIMEOUT = 1.0


def connection_reason(exc: BaseException) -> str:
    """A connection failure in words without addresses: the cause chain's kind, never its message."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if name == "NameResolutionError" or "gaierror" in name:
            return "host name not resolved"
        if isinstance(current, ConnectionRefusedError) or name == "ConnectionRefusedError":
            return "connection refused"
        if isinstance(current, TimeoutError) or "Timeout" in name:
            return "timed out"
        nested = current.args[0] if current.args and isinstance(current.args[0], BaseException) else None
        current = current.__cause__ or current.__context__ or nested or getattr(current, "reason", None)
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text or "Failed to resolve" in text:
        return "host name not resolved"
    if "Connection refused" in text:
        return "connection refused"
    return "connection failed"


class MetricsClient:
    """Queries one Prometheus-compatible endpoint (`base_url` without `/api/v1`)."""

    def __init__(self, base_url: str, *, session: requests.Session | None = None,
                 timeouts: http.Timeouts = QUERY_TIMEOUTS,
                 attempts: int = 2, victoria_metrics: bool = True) -> None:
        if not base_url:
            raise PermanentError("no metrics URL configured (GPUFLEET_METRICS_URL)")
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.session = session or http.session(timeouts)
        self.timeouts = timeouts
        self.attempts = attempts
        self.victoria_metrics = victoria_metrics
        self.requests_made = 0  # for benchmarks: how many round trips a measurement took

    def probe(self, timeout: float = PROBE_TIMEOUT) -> str:
        """"" when the source answers a trivial query within `timeout` seconds, else a short reason a person
        may read ("connection refused", "host name not resolved", "timed out", "HTTP 503"...). One request,
        no retries: pages ask this once before they query, so an outage costs one short wait, not a query's
        retries times the page's queries (and never prints the adapter's exception, which names hosts)."""
        session = http.session(http.Timeouts(connect=timeout, read=timeout), retries=0)
        try:
            response = session.get(f"{self.base_url}/api/v1/query", params={"query": "1"})
        except requests.Timeout:
            return "timed out"
        except requests.ConnectionError as exc:
            return connection_reason(exc)
        except requests.RequestException:
            return "request failed"
        finally:
            session.close()
        if response.status_code >= 400:
            return f"HTTP {response.status_code}"
        try:
            ok = response.json().get("status") == "success"
        except (ValueError, AttributeError):
            ok = False
        return "" if ok else "not a Prometheus query API"

    def instant(self, query: str, at: datetime | int | Decimal) -> list[Series]:
        return self._query("/api/v1/query", {"query": query, "time": _unix(at)})

    def range(self, query: str, start: datetime | int | Decimal, end: datetime | int | Decimal,
              step_seconds: int) -> list[Series]:
        if step_seconds <= 0:
            raise ValueError("step must be positive")
        params = {"query": query, "start": _unix(start), "end": _unix(end), "step": f"{step_seconds}s"}
        return self._query("/api/v1/query_range", params)

    def export_lines(self, selector: str, start: datetime | int | Decimal, end: datetime | int | Decimal) -> list[str]:
        """Raw samples of the series matching `selector` in [start, end], as VictoriaMetrics' JSON lines
        (`/api/v1/export`: one series per line, ms timestamps, no step evaluation). Decoding is the caller's."""
        if not self.victoria_metrics:
            raise PermanentError("reading recorded series needs VictoriaMetrics' /api/v1/export")
        params = {"match[]": selector, "start": _unix(start), "end": _unix(end)}
        return http.retry_transient(lambda: self._send("POST", "/api/v1/export", params, "export").text.splitlines(),
                                    attempts=self.attempts, pause=lambda attempt: min(0.2 * (attempt + 1), 1.0))

    def import_json_lines(self, lines: Iterable[str], *, batch_bytes: int = 16_000_000) -> None:
        """Write series in VictoriaMetrics' JSON-line format (`/api/v1/import`), then flush, so that a
        query after this call sees them (recorded roll-ups: data is written before its coverage record)."""
        if not self.victoria_metrics:
            raise PermanentError("recording series needs VictoriaMetrics' /api/v1/import")
        batch: list[str] = []
        size = 0
        for line in lines:
            batch.append(line)
            size += len(line) + 1
            if size >= batch_bytes:
                self._post_import(batch)
                batch, size = [], 0
        if batch:
            self._post_import(batch)
        self._write("GET", "/internal/force_flush", None)

    def _post_import(self, batch: list[str]) -> None:
        self._write("POST", "/api/v1/import", "\n".join(batch).encode())

    def _write(self, method: str, path: str, body: bytes | None) -> None:
        self._send(method, path, body, "write")

    def _send(self, method: str, path: str, data: bytes | dict[str, str] | None, what: str) -> requests.Response:
        """One request outside the query API (import, flush, export): 5xx transient, 4xx permanent."""
        self.requests_made += 1
        with http.network_errors_are_transient("metrics server", timeout_delay=30, unreachable_delay=15):
            response = self.session.request(method, f"{self.base_url}{path}", data=data,
                                            timeout=self.timeouts.as_tuple())
        if response.status_code >= 500:
            raise TransientError(f"metrics server error {response.status_code}: {response.text[:300]}",
                                 delay=_retry_after(response, 15))
        if response.status_code >= 400:
            raise PermanentError(f"metrics {what} rejected ({response.status_code}): {response.text[:300]}")
        return response

    def _query(self, path: str, params: dict[str, str]) -> list[Series]:
        if self.victoria_metrics:
            params = {**params, "nocache": "1"}
        return http.retry_transient(lambda: self._once(path, params), attempts=self.attempts,
                                    pause=lambda attempt: min(0.2 * (attempt + 1), 1.0))

    def _once(self, path: str, params: dict[str, str]) -> list[Series]:
        url = f"{self.base_url}{path}"
        self.requests_made += 1
        with http.network_errors_are_transient("metrics server", timeout_delay=30, unreachable_delay=15):
            # POST keeps long PromQL out of URLs (both Prometheus and VictoriaMetrics accept form bodies).
            response = self.session.post(url, data=params, timeout=self.timeouts.as_tuple())
        if response.status_code >= 500:
            raise TransientError(f"metrics server error {response.status_code}: {response.text[:300]}",
                                 delay=_retry_after(response, 15))
        try:
            body = response.json()
        except ValueError as exc:
            if response.status_code >= 400:
                raise PermanentError(f"metrics query rejected ({response.status_code}): "
                                     f"{response.text[:300]}") from exc
            raise PermanentError("metrics server did not answer with JSON") from exc
        if not isinstance(body, dict):
            raise PermanentError("metrics server answer is not a JSON object")
        if body.get("status") != "success":
            kind, message = body.get("errorType", ""), body.get("error", "unknown error")
            if kind in TRANSIENT_API_ERRORS:
                raise TransientError(f"metrics query {kind}: {message}", delay=30)
            raise PermanentError(f"metrics query failed ({kind or response.status_code}): {message}")
        if response.status_code >= 400:
            raise PermanentError(f"metrics query rejected ({response.status_code})")
        return parse_result(body.get("data"))


def _retry_after(response: requests.Response, default: float) -> float:
    try:
        return float(response.headers.get("Retry-After", default))
    except ValueError:
        return default
