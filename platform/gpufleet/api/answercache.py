"""A cache of whole rendered API answers (GET, JSON), per process, keyed by everything that decides them.

Why: a page of 50 tenants costs ~7-12 ms of CPU to read and serialize (benchmarks/README.md, "API"), and
most API reads (Terraform refreshes, the portal's and scripts' polling) ask again for what they asked a
moment ago while nothing changed. A hit costs the authentication query (which reads the data version too) and a copy.

What decides an answer, and so is in the key:

- the **data**: the fleet's data version (dataversion.py), which every committed write to any watched
  table increases -- whichever code path made it (actions, admin, bulk updates, raw SQL, COPY, tasks).
  The cache holds entries of one version only; the first request that reads a newer one empties it;
- the **caller**: the user's primary key (their scope, memberships and roles are data, hence versioned)
  and their platform roles as authentication read them;
- the **request**: view class and action, the full path with its query string, host and scheme (links to
  the next page are absolute), the negotiated media type (JSON only: `indent=` changes the bytes), the
  API version, the active time zone and language.

Never cached: anything but GET, answers other than 200, the browsable API (HTML with a CSRF token),
requests without a data version (before its migration) and requests inside a transaction (`atomic` block), which could
see their own uncommitted writes -- those are not in any committed version. An answer is stored under the
version read *before* its data, and the data it was built from is at least that new: a reader of that
version never gets anything older than what it could have read itself.

Per process, in memory: no network hop per hit, and nothing to keep consistent between processes (each
reads the version from PostgreSQL). Bounded by GPUFLEET_API_CACHE_BYTES (0 turns it off), least recently
used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from django.db import connections, router
from django.http import HttpResponse
from django.utils import timezone, translation
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from gpufleet.core import conf

from .dataversion import read_version

DEFAULT_BYTES = 32 * 1024 * 1024
WAIT_S = 2.0  # longest a request waits for another thread computing the same answer, then computes it itself
Entry = tuple[int, bytes, tuple[tuple[str, str], ...]]


class _Flight:
    """An answer one thread is computing; the others that ask for it wait on `done`."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.stored = False


class AnswerCache:
    """Rendered answers of one data version; thread-safe (gthread workers share one per process)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], Entry] = OrderedDict()
        self._inflight: dict[tuple[Any, ...], _Flight] = {}
        self._bytes = 0
        self._version: int | None = None
        self.hits = self.misses = 0

    def _adopt(self, version: int) -> None:
        # Any other version than the one held (newer, or a restored database's) empties the cache: entries
        # are only ever served to requests that read exactly the version they were stored under.
        if version != self._version:
            self._entries.clear()
            self._bytes = 0
            self._version = version

    def get(self, version: int, key: tuple[Any, ...]) -> tuple[Entry | None, bool]:
        """(the entry, None on a miss; whether the caller now computes it for the others).

        Right after a write every thread of the process misses the same answers at once; one computes each,
        the others wait for it (at most WAIT_S) instead of building the same page in parallel."""
        waited = False
        while True:
            with self._lock:
                self._adopt(version)
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return entry, False
                flight = self._inflight.get((version, key))
                if flight is None and not waited:
                    self._inflight[(version, key)] = _Flight()
                    self.misses += 1
                    return None, True
                if flight is None:  # the one we waited for is done but stored nothing (an error, evicted)
                    self.misses += 1
                    return None, False
            if not flight.done.wait(WAIT_S) or not flight.stored:
                with self._lock:
                    self.misses += 1
                return None, False  # too slow or nothing to share: compute it here, unshared
            waited = True

    def finish(self, version: int, key: tuple[Any, ...], stored: bool) -> None:
        """The computing request is done: wake the requests that wait for its answer."""
        with self._lock:
            flight = self._inflight.pop((version, key), None)
        if flight is not None:
            flight.stored = stored
            flight.done.set()

    def put(self, version: int, key: tuple[Any, ...], status: int, content: bytes,
            headers: tuple[tuple[str, str], ...]) -> bool:
        size = len(content) + 256
        if size > self.max_bytes // 4:  # one answer may not push out most of the others
            return False
        with self._lock:
            if version != self._version:  # a newer version was seen meanwhile: this answer may be stale
                return False
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old[1]) + 256
            self._entries[key] = (status, content, headers)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped[1]) + 256
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._version = None


_cache: AnswerCache | None = None
_cache_guard = threading.Lock()


def answer_cache() -> AnswerCache | None:
    global _cache
    if _cache is None:
        with _cache_guard:
            if _cache is None:
                _cache = AnswerCache(int(conf.API_CACHE_BYTES))
    return _cache if _cache.max_bytes > 0 else None


class _Hit(Exception):
    def __init__(self, response: HttpResponse) -> None:
        self.response = response


# Headers the view sets on a rendered answer (DRF: Content-Type, Allow, Vary; ConditionalMixin: ETag) are
# stored with it. Everything middleware adds (CSP, security headers, Vary: Cookie) is added on the way
# out of every answer, cached or not.
class CachedReadsMixin:
    """First in a view's bases. GET answers of `cached_actions` (viewsets) or of any GET (plain views)."""

    cached_actions: tuple[str, ...] = ("list", "retrieve")

    def _answer_key(self, request: Any) -> tuple[int, tuple[Any, ...]] | None:
        if request.method != "GET" or not isinstance(getattr(request, "accepted_renderer", None), JSONRenderer):
            return None
        action = getattr(self, "action", None)
        if hasattr(self, "action") and action not in self.cached_actions:
            return None
        user = request.user
        if not user.is_authenticated or answer_cache() is None:
            return None
        db = router.db_for_read(user.__class__)
        if connections[db].in_atomic_block:
            return None
        # Token requests got the version with the token (accounts/tokens.py); others ask for it.
        version = getattr(request.auth, "data_version", None)
        if version is None:
            version = read_version(db)
        if version is None:
            return None
        roles = tuple(sorted(getattr(user, "_gpufleet_roles", ()) or ()))
        key = (type(self).__module__, type(self).__qualname__, action, user.pk, user.is_superuser, roles,
               request.get_full_path(), request.get_host(), request.is_secure(), request.accepted_media_type,
               getattr(request, "version", None), timezone.get_current_timezone_name(),
               translation.get_language())
        return version, key

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]  # authentication, permissions
        self._answer = self._answer_key(request)
        cache = answer_cache()
        if self._answer is None or cache is None:
            return
        entry, self._computing = cache.get(*self._answer)
        if entry is not None:
            status, content, headers = entry
            response = HttpResponse(content, status=status)
            for name, value in headers:
                response[name] = value
            self._answer = None  # nothing to store
            raise _Hit(response)

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._answer, self._computing = None, False
        try:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        finally:
            # Whatever happened (an answer not worth storing, an exception DRF re-raised), never leave the
            # requests waiting for this one hanging until WAIT_S.
            self._finish(stored=False)

    def _finish(self, stored: bool) -> None:
        answer, computing = self._answer, self._computing
        self._answer, self._computing = None, False
        if computing and answer is not None and _cache is not None:  # even if it was just turned off
            _cache.finish(*answer, stored=stored)

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, _Hit):
            return exc.response
        return super().handle_exception(exc)  # type: ignore[misc]

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        answer = getattr(self, "_answer", None)
        stored = False
        if answer is not None and isinstance(response, Response) and response.status_code == 200:
            response.render()
            cache = answer_cache()
            if cache is not None:
                stored = cache.put(*answer, response.status_code, bytes(response.content), tuple(response.items()))
        if answer is not None:
            self._finish(stored)
        return response
