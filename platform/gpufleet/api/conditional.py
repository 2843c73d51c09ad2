"""HTTP semantics every API view shares: Idempotency-Key on POST, ETag on reads, If-Match on writes.

- **Idempotency-Key** (draft-ietf-httpapi-idempotency-key-header): a POST with the header is recorded per
  user for 24 hours. The same key with the same method, path and body gets the first answer again
  (status and body, header `Idempotent-Replayed: true`) and nothing is done twice; the same key with a
  different request is 422; while the first is still running, 409 (clients retry). A 5xx is not
  recorded, so a retry runs the request again. A view that answers with a secret shown once (an API
  token) names it in `idempotency_secret_fields`: the stored answer has it removed, and a replay of a
  success is a problem saying why (`replay_withheld`: 409, or 410 once the token is revoked), never the
  first answer without its secret nor a resurrected one.
- **ETag** on every 200 answer carrying one object: a strong validator over its JSON representation.
- **If-Match** on PATCH/PUT/DELETE of an object: when it does not match the object's current ETag the
  write is refused with 412 and nothing changes (`*` matches any existing object).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db import IntegrityError, transaction
from rest_framework.response import Response

from gpufleet import clock

from .errors import (
    IdempotencyKeyInFlight,
    IdempotencyKeyReused,
    IdempotentSecretWithheld,
    PreconditionFailed,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITE_METHODS = {"PATCH", "PUT", "DELETE"}


def etag_of(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'


def _digest(method: str, path: str, body: bytes) -> str:
    try:
        canonical = json.dumps(json.loads(body or b"null"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        canonical = body.decode("utf-8", "replace")
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


class _Replay(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def without(data: Any, fields: tuple[str, ...]) -> Any:
    """`data` as JSON with the top-level `fields` removed (what may be stored at rest)."""
    stored = json.loads(json.dumps(data, default=str))
    if isinstance(stored, dict):
        for name in fields:
            stored.pop(name, None)
    return stored


class IdempotencyMixin:
    # Top-level fields of a success answer that hold a secret shown once: never stored, never replayed.
    idempotency_secret_fields: tuple[str, ...] = ()

    def replay_withheld(self, stored: Any) -> Exception:
        """The problem answering a replay of a success whose secret was withheld (views may be more precise)."""
        return IdempotentSecretWithheld()

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self._idempotency_row = None
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if request.method != "POST" or not key or not request.user.is_authenticated:
            return
        from .models import KEY_LIFETIME, KEY_MAX, IdempotencyKey

        if len(key) > KEY_MAX:
            from rest_framework.exceptions import ValidationError

            raise ValidationError({IDEMPOTENCY_HEADER: [f"must be at most {KEY_MAX} characters"]})
        now = clock.now()
        digest = _digest(request.method, request.path, request.body)
        # Expired keys of this user go now (an indexed delete); the key may then be used afresh.
        IdempotencyKey.objects.filter(user=request.user, expires_at__lte=now).delete()
        try:
            with transaction.atomic():
                self._idempotency_row = IdempotencyKey.objects.create(
                    user=request.user, key=key, method=request.method, path=request.path[:500],
                    request_digest=digest, created=now, expires_at=now + KEY_LIFETIME)
            return
        except IntegrityError:
            row = IdempotencyKey.objects.filter(user=request.user, key=key).first()
        if row is None:  # expired and removed in between: treat as in flight, the client retries
            raise IdempotencyKeyInFlight()
        if row.request_digest != digest:
            raise IdempotencyKeyReused()
        if row.status is None:
            raise IdempotencyKeyInFlight()
        if self.idempotency_secret_fields and row.status < 300:
            raise self.replay_withheld(row.response_body)
        replay = Response(row.response_body, status=row.status)
        replay["Idempotent-Replayed"] = "true"
        raise _Replay(replay)

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Replay):
            return exc.response
        return super().handle_exception(exc)  # type: ignore[misc,no-any-return]

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        row = getattr(self, "_idempotency_row", None)
        if row is not None:
            self._idempotency_row = None
            if response.status_code >= 500 or not hasattr(response, "data"):
                row.delete()  # a failure is not an answer: the retry runs the request again
            else:
                row.status = response.status_code
                row.response_body = without(response.data, self.idempotency_secret_fields)
                row.save(update_fields=["status", "response_body"])
        return response


class ConditionalMixin:
    """ETag on one-object answers; If-Match checked before PATCH/PUT/DELETE of an object.

    The check and the write are one transaction, and the check holds the object's row lock: a comparison made
    before the lock would let every request that read the same ETag pass before the first one commits (50
    parallel PATCHes with one If-Match gave 7-8 x 200). Under the lock the second request waits for the first
    to commit, then compares with what it wrote and gets 412. The action's own transaction nests inside
    (a savepoint), and its on-commit work runs when this one commits.
    """

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if request.method in WRITE_METHODS and request.headers.get("If-Match"):
            with transaction.atomic():
                return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        expected = request.headers.get("If-Match")
        lookup = getattr(self, "lookup_url_kwarg", None) or getattr(self, "lookup_field", "pk")
        if not expected or request.method not in WRITE_METHODS or lookup not in kwargs:
            return
        self.lock_for_write(self.get_object())  # type: ignore[attr-defined]  # 404 / 403 first, as without If-Match
        # Read again under the lock (a new statement sees what a writer we waited for committed).
        current = etag_of(self.get_serializer(self.get_object()).data)  # type: ignore[attr-defined]
        tags = {t.strip().removeprefix("W/") for t in expected.split(",")}
        if "*" not in tags and current not in tags:
            raise PreconditionFailed()

    def lock_for_write(self, obj: Any) -> None:
        """Take the lock the write will take, before comparing. The object's row by default (by primary key
        alone: the view's queryset may join nullable relations, which FOR UPDATE refuses). A view whose action
        locks another row first overrides this to take the same locks in the same order (no deadlock)."""
        type(obj)._default_manager.select_for_update().filter(pk=obj.pk).values_list("pk").first()

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        lookup = getattr(self, "lookup_url_kwarg", None) or getattr(self, "lookup_field", "pk")
        data = getattr(response, "data", None)
        if (response.status_code == 200 and request.method in ("GET", "HEAD", "PATCH", "PUT")
                and lookup in self.kwargs and isinstance(data, dict) and "id" in data):  # type: ignore[attr-defined]
            response["ETag"] = etag_of(data)
        return response
