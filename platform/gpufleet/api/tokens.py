"""/api/v1/tokens/: a user's own API tokens. The secret is returned once, at creation."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from gpufleet import clock
from gpufleet.accounts.models import ApiToken
from gpufleet.api.errors import IdempotentSecretWithheld, IdempotentTokenRevoked
from gpufleet.api.serializers import StrictModelSerializer
from gpufleet.api.viewsets import AuditActorMixin
from gpufleet.audit.record import record


class ApiTokenSerializer(StrictModelSerializer):
    active = serializers.BooleanField(source="is_active", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "last_used_at", "expires_at", "revoked_at", "active"]
        read_only_fields = ["id", "prefix", "created", "last_used_at", "revoked_at", "active"]

    def validate_expires_at(self, value):  # type: ignore[no-untyped-def]
        if value is not None and value <= clock.now():
            raise serializers.ValidationError("must be in the future")
        return value


class ApiTokenViewSet(
    AuditActorMixin,
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = ApiTokenSerializer
    queryset = ApiToken.objects.all()
    # The secret is shown in the first answer only: an Idempotency-Key row never keeps it (conditional.py).
    idempotency_secret_fields = ("token",)

    def replay_withheld(self, stored: Any) -> Exception:
        """A replay names the token the first request made: 410 once revoked (or gone), else 409."""
        token_id = stored.get("id") if isinstance(stored, dict) else None
        token = ApiToken.objects.for_user(self.request.user).filter(pk=token_id).first() if token_id else None
        if token is None or token.revoked_at is not None:
            return IdempotentTokenRevoked(
                f"the API token created with this Idempotency-Key (id {token_id}) has been revoked; "
                "create a new one with a new key")
        return IdempotentSecretWithheld(
            f"the API token created with this Idempotency-Key (id {token.pk}, prefix {token.prefix}) exists; "
            "its secret was shown once, in the first answer, and is not stored: revoke it and create a new one "
            "if the secret was lost")

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return ApiToken.objects.for_user(self.request.user)

    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        plaintext, prefix, digest = ApiToken.generate()
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=request.user, prefix=prefix, digest=digest, **serializer.validated_data
            )
            record("token.create", token, after={"name": token.name, "prefix": prefix})
        data = self.get_serializer(token).data
        data["token"] = plaintext  # shown once; only its hash is stored
        return Response(data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Revoke (the row stays, so audit events keep pointing at it)."""
        token = self.get_object()
        with transaction.atomic():
            if token.revoked_at is None:
                token.revoked_at = clock.now()
                token.save(update_fields=["revoked_at"])
                record("token.revoke", token, after={"name": token.name, "prefix": token.prefix})
        return Response(status=status.HTTP_204_NO_CONTENT)
