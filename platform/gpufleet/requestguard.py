"""Refuse, before any view runs, the two inputs no view can store: an oversized body and a NUL character.

- A body larger than `DATA_UPLOAD_MAX_MEMORY_SIZE` is a 413. Django enforces that limit only when it parses a
  form itself (`request.POST`, `request.body`); DRF's JSON parser reads the stream directly, so a 100 MB JSON
  body was read and parsed whole on every write route. The declared `Content-Length` is checked here, before
  anything reads the stream (a body without one is read as empty by Django's WSGI request, so it cannot
  exceed the limit either).
- PostgreSQL refuses NUL (U+0000) in text, so a `%00` in any query filter or path value reached the database and
  answered 500 on every list route that filters. No name, slug or filter value of the platform can hold one:
  a NUL in a query parameter is a 400 naming the parameter, in a path value a 404 naming it (no object has such a
  name). Request bodies are checked by the API's parsers (gpufleet.api.parsers), which know the field's name.

API paths answer in the API's one error format (application/problem+json, gpufleet.api.errors); portal paths
get a short plain-text answer with the same status.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

NUL = "\x00"
NUL_REASON = "must not contain the NUL character (U+0000)"


def _answer(request: HttpRequest, status: int, code: str, field: str, reason: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        from gpufleet.api.errors import PROBLEM_JSON, problem

        body = problem(status, code, [{"field": field, "reason": reason}])
        return HttpResponse(json.dumps(body), status=status, content_type=PROBLEM_JSON)
    text = f"{field}: {reason}" if field else reason
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


def body_limit() -> int | None:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def declared_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:  # Django's WSGIRequest reads a malformed length as 0 too
        return 0


class RequestGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit()
        length = declared_length(request)
        if limit is not None and length > limit:
            return _answer(request, 413, "too_large", "",
                           f"the request body is {length} bytes; the limit is {limit} bytes")
        for name, values in request.GET.lists():
            if NUL in name:
                return _answer(request, 400, "invalid", name.replace(NUL, "\\x00"),
                               "is not a parameter (" + NUL_REASON + ")")
            if any(NUL in value for value in values):
                return _answer(request, 400, "invalid", name, NUL_REASON)
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> HttpResponse | None:
        for name, value in kwargs.items():
            if isinstance(value, str) and NUL in value:
                return _answer(request, 404, "not_found", name, NUL_REASON + "; no object has such a name")
        if any(isinstance(value, str) and NUL in value for value in args):
            return _answer(request, 404, "not_found", "path", NUL_REASON + "; no object has such a name")
        return None
