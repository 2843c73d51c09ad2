"""gpufleet_api_token: the secret is known only when the token is created (it is stored hashed)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute, Schema
from tf.types import String

from .client import ApiError
from .common import Base, guarded


def same_instant(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return datetime.fromisoformat(str(a).replace("Z", "+00:00")) == datetime.fromisoformat(
            str(b).replace("Z", "+00:00"))
    except ValueError:
        return False


class ApiToken(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "api_token"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="An API token of the provider's user.", attributes=[
            Attribute("id", String(), computed=True),
            Attribute("name", String(), required=True, requires_replace=True),
            Attribute("expires_at", String(), optional=True, requires_replace=True,
                      description="RFC 3339 time after which the token stops working"),
            Attribute("prefix", String(), computed=True, description="First characters, to recognise it"),
            Attribute("token", String(), computed=True, sensitive=True,
                      description="The secret; known only at create (null after import)"),
        ])

    @staticmethod
    def state(row: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
        expires = current.get("expires_at") if same_instant(current.get("expires_at"), row["expires_at"]) \
            else row["expires_at"]
        return {"id": str(row["id"]), "name": row["name"], "expires_at": expires, "prefix": row["prefix"],
                "token": row.get("token", current.get("token"))}

    @guarded("creating the API token")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        body = {"name": planned["name"]}
        if planned.get("expires_at") is not None:
            body["expires_at"] = planned["expires_at"]
        return self.state(self.client.post("tokens/", body), planned)

    @guarded("reading the API token")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            row = self.client.get(f"tokens/{current['id']}/")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return None if row.get("revoked_at") else self.state(row, current)

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        ctx.diagnostics.add_error("API tokens are replaced, not updated (this is a provider bug)")
        return current

    @guarded("revoking the API token")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"tokens/{current['id']}/")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return None

    @guarded("importing the API token")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        """By id (token names need not be unique); the secret cannot be imported."""
        return self.state(self.client.get(f"tokens/{id}/"), {})
