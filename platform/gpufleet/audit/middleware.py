"""Stamp every request with an id and, once authenticated, the acting user."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .context import acting, new_request_id


class AuditContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request.headers.get("X-Request-Id", "")[:64] or new_request_id()
        # Also on the request: Django logs a 4xx/5xx answer after the middleware returns (django.request,
        # with the request in the record), outside this context; the JSON log formatter reads it there.
        request.request_id = request_id  # type: ignore[attr-defined]
        user = getattr(request, "user", None)
        user_id = user.pk if user is not None and user.is_authenticated else None
        with acting(user_id=user_id, request_id=request_id, token_id=None, task=""):
            response = self.get_response(request)
        response["X-Request-Id"] = request_id
        return response
