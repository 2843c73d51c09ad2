"""Base viewsets: permissions are enforced once, by scoping every queryset to the caller.

A view declares its model's `for_user` scope; objects outside it are simply not found (404), so a
member of tenant A cannot even learn that tenant B exists.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import viewsets


class ScopedViewSetMixin:
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
