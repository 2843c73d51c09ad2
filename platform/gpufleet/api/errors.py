"""One error format for the whole API: RFC 9457 problem details (`application/problem+json`).

    {"type": "urn:gpufleet:problem:invalid", "title": "Invalid input", "status": 400,
     "detail": "slug: must be lowercase",
     "fields": {"slug": ["must be lowercase"]},                         # validation errors, by field
     "error": "invalid", "errors": [{"field": "slug", "reason": "..."}]}  # kept from v1's first format

`type`, `title`, `status` and `detail` are RFC 9457's members; `fields`, `error` and `errors` are extension
members (RFC 9457 §3.2). The earlier body was `{error, detail, errors}`; those keys stay so existing clients keep
working. Every 4xx names the field (or "" for the request as a whole) and the reason; an unexpected exception is
logged and answered as a 500 problem, never an HTML page.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from gpufleet.core.errors import ActionError

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:gpufleet:problem:"


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "the object changed since you read it (If-Match does not match its ETag)"
    default_code = "precondition_failed"


class IdempotencyKeyReused(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "this Idempotency-Key was already used with a different request"
    default_code = "idempotency_key_reused"


class IdempotencyKeyInFlight(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "a request with this Idempotency-Key is still being processed; retry later"
    default_code = "idempotency_key_in_flight"


class IdempotentSecretWithheld(exceptions.APIException):
    """A replayed POST whose first answer held a secret: the secret was shown once and never stored."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = ("the first request with this Idempotency-Key succeeded; its answer held a secret that is "
                      "shown once and not stored, so it cannot be replayed")
    default_code = "idempotency_secret_withheld"


class IdempotentTokenRevoked(exceptions.APIException):
    """A replayed token creation whose token has been revoked since: gone, and never shown again."""

    status_code = status.HTTP_410_GONE
    default_detail = "the API token created with this Idempotency-Key has been revoked"
    default_code = "idempotency_token_revoked"


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    if isinstance(detail, dict):
        out: list[dict[str, str]] = []
        for key, value in detail.items():
            field = "" if key in ("non_field_errors", "") else (f"{prefix}.{key}" if prefix else str(key))
            out.extend(_flatten(value, field))
        return out
    if isinstance(detail, list):
        out = []
        for index, item in enumerate(detail):
            out.extend(_flatten(item, f"{prefix}[{index}]" if isinstance(item, dict) else prefix))
        return out
    return [{"field": prefix, "reason": str(detail)}]


def problem(status_code: int, code: str, errors: list[dict[str, str]]) -> dict[str, Any]:
    """The problem-details body for `status_code`; `errors` lists {field, reason} ('' = the whole request)."""
    detail = "; ".join(f"{e['field']}: {e['reason']}" if e["field"] else e["reason"] for e in errors)
    fields: dict[str, list[str]] = {}
    for e in errors:
        if e["field"]:
            fields.setdefault(e["field"], []).append(e["reason"])
    try:
        title = HTTPStatus(status_code).phrase
    except ValueError:
        title = "Error"
    body: dict[str, Any] = {"type": TYPE_PREFIX + code, "title": title, "status": status_code, "detail": detail}
    if fields:
        body["fields"] = fields
    body.update({"error": code, "errors": errors})
    return body


def error_body(code: str, errors: list[dict[str, str]], status_code: int = 400) -> dict[str, Any]:
    return problem(status_code, code, errors)


def _as_problem(response: Response, context: dict[str, Any]) -> Response:
    renderer = getattr(context.get("request"), "accepted_renderer", None)
    if renderer is None or getattr(renderer, "format", "json") == "json":
        response.content_type = PROBLEM_JSON
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ActionError):
        # Inside a request's transaction (a conditional write, conditional.py) nothing of it may stay.
        set_rollback()
        errors = [{"field": f, "reason": r} for f, reasons in exc.errors.items() for r in reasons]
        code = {"conflict": status.HTTP_409_CONFLICT, "forbidden": status.HTTP_403_FORBIDDEN}.get(
            exc.code, status.HTTP_400_BAD_REQUEST)
        return _as_problem(Response(problem(code, exc.code, errors), status=code), context)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        # Not an API exception: a bug. Log it with its traceback and answer in the one format.
        log.exception("unhandled error in %s", context.get("view").__class__.__name__, exc_info=exc)
        body = problem(500, "server_error", [{"field": "", "reason": "internal server error"}])
        return _as_problem(Response(body, status=500), context)
    if isinstance(exc, exceptions.ValidationError):
        response.data = problem(response.status_code, "invalid", _flatten(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if response.status_code >= 500:
            # A dependency failed (cluster, metrics server...): its error text names hosts, queries and
            # exceptions. The caller gets the exception's fixed sentence; the operator the log line.
            log.warning("%s in %s: %s", type(exc).__name__, context.get("view").__class__.__name__, detail)
            detail = str(type(exc).default_detail)
        codes = exc.get_codes()
        response.data = problem(response.status_code, codes if isinstance(codes, str) else "error",
                                [{"field": "", "reason": str(detail)}])
    return _as_problem(response, context)


def _django_problem(request: Any, status_code: int, code: str, reason: str) -> Any:
    import json

    from django.http import HttpResponse

    body = problem(status_code, code, [{"field": "", "reason": reason}])
    return HttpResponse(json.dumps(body), status=status_code, content_type=PROBLEM_JSON)


def not_found(request: Any, exception: Exception | None = None) -> Any:
    """Django's 404 handler: a problem for /api/ paths (an unknown URL), the usual page elsewhere."""
    if request.path.startswith("/api/"):
        return _django_problem(request, 404, "not_found", "no such API path")
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def server_error(request: Any) -> Any:
    """Django's 500 handler (errors outside DRF views, e.g. in middleware): a problem for /api/ paths."""
    if request.path.startswith("/api/"):
        return _django_problem(request, 500, "server_error", "internal server error")
    from django.views.defaults import server_error as default_server_error

    return default_server_error(request)
