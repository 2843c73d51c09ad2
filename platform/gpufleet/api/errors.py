"""One error format for the whole API.

    {"error": "invalid", "detail": "slug: must be lowercase", "errors": [{"field": "slug", "reason": "..."}]}

Every 4xx names the field (or "" for the request as a whole) and the reason; nothing is a 500.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from tenants.errors import ActionError


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


def error_body(code: str, errors: list[dict[str, str]]) -> dict[str, Any]:
    detail = "; ".join(f"{e['field']}: {e['reason']}" if e["field"] else e["reason"] for e in errors)
    return {"error": code, "detail": detail, "errors": errors}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ActionError):
        errors = [{"field": f, "reason": r} for f, reasons in exc.errors.items() for r in reasons]
        code = status.HTTP_409_CONFLICT if exc.code == "conflict" else status.HTTP_400_BAD_REQUEST
        return Response(error_body(exc.code, errors), status=code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body("invalid", _flatten(exc.detail))
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        response.data = error_body(exc.get_codes() if isinstance(exc.get_codes(), str) else "error",
                                   [{"field": "", "reason": str(detail)}])
    return response
