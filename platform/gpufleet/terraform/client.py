"""The provider's HTTP client of the gpufleet REST API.

- Every request has a timeout and goes to `<endpoint>/api/v1/...` with `Authorization: Bearer <token>`.
- 409, 429 and 503 are retried with exponential backoff (honouring `Retry-After`) until the retry budget
  is spent: a busy server, a tenant momentarily being reconciled or a rolling restart must not fail an apply.
  Connection errors and timeouts are retried too.
- Every POST carries an `Idempotency-Key`, the same on each retry, so a create whose answer was lost is
  never performed twice (the server returns the first result).
- Error answers are RFC 9457 problem details; `ApiError` keeps the status and the field map so the
  provider can put each reason on the attribute it concerns.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

RETRY_STATUSES = frozenset({409, 429, 503})
# A 409 no retry can change: a replayed create whose answer held a secret shown once (the server never
# stores it, platform/gpufleet/api/conditional.py).
FINAL_CONFLICTS = frozenset({"idempotency_secret_withheld"})


@dataclass
class ApiError(Exception):
    status: int
    detail: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    code: str = ""

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.detail}"

    @classmethod
    def from_response(cls, response: requests.Response) -> ApiError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        fields = body.get("fields") or {}
        if not fields:  # servers before problem+json: the {field, reason} list
            for item in body.get("errors") or []:
                if isinstance(item, dict) and item.get("field"):
                    fields.setdefault(item["field"], []).append(str(item.get("reason", "")))
        detail = body.get("detail") or response.reason or f"HTTP {response.status_code}"
        return cls(response.status_code, str(detail), fields, str(body.get("error") or ""))


def _problem_code(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("error") or "") if isinstance(body, dict) else ""


@dataclass
class Client:
    endpoint: str
    token: str
    timeout: float = 30.0
    ca_bundle: str | None = None
    retry_budget: float = 60.0  # seconds spent waiting between retries, at most, per request
    sleep: Callable[[float], None] = time.sleep
    session: requests.Session = field(default_factory=requests.Session)

    def url(self, path: str) -> str:
        return f"{self.endpoint.rstrip('/')}/api/v1/{path.lstrip('/')}"

    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        if method == "POST":
            headers.setdefault("Idempotency-Key", str(uuid.uuid4()))
        waited, delay = 0.0, 0.5
        while True:
            try:
                response = self.session.request(method, self.url(path), json=json, params=params, headers=headers,
                                                timeout=self.timeout, verify=self.ca_bundle or True)
            except (requests.ConnectionError, requests.Timeout) as exc:
                if waited >= self.retry_budget:
                    raise ApiError(0, f"{method} {path}: {exc}") from exc
                response = None
            if response is not None and (response.status_code not in RETRY_STATUSES
                                         or _problem_code(response) in FINAL_CONFLICTS):
                if response.status_code >= 400:
                    raise ApiError.from_response(response)
                return response
            if response is not None and waited >= self.retry_budget:
                raise ApiError.from_response(response)
            pause = min(delay, 10.0)
            if response is not None and response.headers.get("Retry-After", "").isdigit():
                pause = float(response.headers["Retry-After"])
            pause = min(pause, max(self.retry_budget - waited, 0.0)) or 0.1
            self.sleep(pause)
            waited += pause
            delay *= 2

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.request("POST", path, json=body or {})
        return response.json() if response.content else None

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, json=body).json()

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def find(self, collection: str, **filters: Any) -> dict[str, Any] | None:
        """The one object of `collection` matching the exact `filters` (a natural key), or None."""
        rows = self.get(f"{collection}/", **filters)
        results = rows["results"] if isinstance(rows, dict) else rows
        for row in results:
            if all(str(row.get(k)) == str(v) for k, v in filters.items()):
                return row  # type: ignore[no-any-return]
        return None

    def wait(self, what: str, probe: Callable[[], Any], done: Callable[[Any], bool], timeout: float,
             interval: float = 1.0) -> Any:
        """Poll `probe` until `done(value)`; raises TimeoutError with the last value after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if done(value):
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
            self.sleep(interval)
