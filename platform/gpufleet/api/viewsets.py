"""Base viewsets: permissions are enforced once, by scoping every queryset to the caller.

A view declares its model's `for_user` scope; objects outside it are simply not found (404), so a
member of tenant A cannot even learn that tenant B exists.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import viewsets

from .conditional import ConditionalMixin, IdempotencyMixin
from .serializers import refuse_body


class _AuditActor:
    """After DRF authenticates (session, token or a test's forced user), stamp the audit actor.

    Django middleware runs before DRF authentication, so it cannot know a token's user.
    """

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        from gpufleet.accounts.models import ApiToken
        from gpufleet.audit.context import set_actor

        user = request.user
        token = request.auth if isinstance(request.auth, ApiToken) else None
        set_actor(user_id=user.pk if user.is_authenticated else None, token_id=token.pk if token else None)
        # Unknown fields are refused on every route: on the ones that take no body (DELETE, and actions marked
        # @no_body such as approve), any field is unknown.
        handler = getattr(self, getattr(self, "action", None) or request.method.lower(), None)
        if handler is not None and (request.method == "DELETE" or getattr(handler, "takes_no_body", False)):
            refuse_body(request.data)  # (no handler: the method is not allowed, a 405 follows)


# For plain APIViews that are not resources (no ETag / If-Match, no Idempotency-Key): the audit actor only.
AuditActor = _AuditActor


class AuditActorMixin(ConditionalMixin, IdempotencyMixin, _AuditActor):
    """The base of every API view: audit actor, Idempotency-Key on POST, ETag / If-Match (conditional.py)."""


class ScopedViewSetMixin(AuditActorMixin):
    """Subclasses set `queryset`; its manager must offer `for_user(user)`."""

    queryset: QuerySet

    def get_queryset(self) -> QuerySet:
        base = super().get_queryset()  # type: ignore[misc]
        return base.for_user(self.request.user)  # type: ignore[attr-defined]


class ScopedModelViewSet(ScopedViewSetMixin, viewsets.ModelViewSet):
    pass


class ScopedReadOnlyViewSet(ScopedViewSetMixin, viewsets.ReadOnlyModelViewSet):
    pass


def field_errors(**reasons: Any) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in reasons.items()}
