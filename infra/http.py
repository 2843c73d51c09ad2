"""The one way gpufleet talks HTTP to other services: a `requests` session whose timeouts cannot be forgotten.

`requests` waits forever when no timeout is given; one hung metrics or cost server would then hang a Celery
worker. `session()` returns a `Session` that fills in `timeout=(connect, read)` on every request that does
not pass one, and retries only what is safe to retry: idempotent methods (GET/HEAD/OPTIONS), on connection
failures and on 502/503/504 (the gateway or server said "not now"), with a short bounded back-off. A 500 is
not retried here: callers decide (the metrics and OpenCost clients retry it themselves, a bounded number of
times, because their queries are read-only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from infra.errors import TransientError, UnreachableError

T = TypeVar("T")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
RETRY_STATUSES = (502, 503, 504)


@dataclass(frozen=True)
class Timeouts:
    connect: float = 3.05
    read: float = 30.0

    def as_tuple(self) -> tuple[float, float]:
        return (self.connect, self.read)


DEFAULT_TIMEOUTS = Timeouts()


class TimeoutSession(requests.Session):
    """A Session that always sends a timeout (the default one when the caller gave none)."""

    def __init__(self, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> None:
        super().__init__()
        if timeouts.connect <= 0 or timeouts.read <= 0:
            raise ValueError("timeouts must be positive; requests treats None as 'wait forever'")
        self.timeouts = timeouts

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        # `timeout=None` would mean "forever": replace it too, not just a missing one.
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self.timeouts.as_tuple()
        return super().request(method, url, *args, **kwargs)


def session(timeouts: Timeouts = DEFAULT_TIMEOUTS, *, retries: int = 2, backoff: float = 0.2,
            user_agent: str = "gpufleet") -> TimeoutSession:
    """A new session with default timeouts and safe retries (idempotent methods only)."""
    s = TimeoutSession(timeouts)
    retry = Retry(
        total=retries,
        connect=retries,
        read=False,  # a read timeout may mean the server is still working: re-raise it, the caller decides
        status=retries,
        allowed_methods=SAFE_METHODS,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff,
        backoff_max=5,
        raise_on_status=False,  # hand the last response back; the client maps it to an error
        respect_retry_after_header=False,  # a server asking for minutes must not stall a worker; see delay
    )
    adapter = HTTPAdapter(max_retries=retry)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.headers["User-Agent"] = user_agent
    return s


def retry_transient(call: Callable[[], T], *, attempts: int, pause: Callable[[int], float]) -> T:
    """`call()` up to `attempts` times while it raises `TransientError`; the last one propagates.

    `pause(n)` is how long to wait after the n-th failure (counting from 0). Anything else is not retried.
    """
    for attempt in range(attempts - 1):
        try:
            return call()
        except TransientError:
            time.sleep(pause(attempt))
    return call()


@contextmanager
def network_errors_are_transient(service: str, *, timeout_delay: float, unreachable_delay: float) -> Iterator[None]:
    """Turn `requests`' timeout and connection failures into `TransientError`s naming the service."""
    try:
        yield
    except requests.Timeout as exc:
        raise UnreachableError(f"{service} timed out: {exc}", delay=timeout_delay) from exc
    except requests.ConnectionError as exc:
        raise UnreachableError(f"{service} unreachable: {exc}", delay=unreachable_delay) from exc
