"""gpufleet_tenant and gpufleet_tenant_member."""

from __future__ import annotations

from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, PlanContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute, Schema
from tf.types import Bool, Number, String, Unknown

from .client import ApiError
from .common import Base, guarded, split_key

DEFAULT_TIMEOUT = 600.0
SETTLED = {"ready", "failed"}
GONE = {"deleted", "rejected"}


def condition_message(tenant: dict[str, Any]) -> str:
    for cond in tenant.get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            return f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return "no condition recorded"


class Tenant(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "tenant"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A tenant: a vCluster, its host namespace, quotas and isolation.",
                      attributes=[
            Attribute("id", String(), computed=True, description="API id of the tenant"),
            Attribute("slug", String(), required=True, requires_replace=True,
                      description="DNS label naming the tenant forever; changing it replaces the tenant"),
            Attribute("display_name", String(), optional=True, computed=True,
                      description="Human name (defaults to the slug)"),
            Attribute("trust_level", String(), required=True,
                      description="untrusted, standard or trusted; changed in place (platform admins only)"),
            Attribute("approve", Bool(), optional=True, computed=True,
                      description="Approve the request (needs a platform-admin token), so one apply bootstraps it; "
                      "when unset (or imported): whether the tenant has been approved"),
            Attribute("timeout", Number(), optional=True,
                      description=f"Seconds to wait for ready and for teardown (default {DEFAULT_TIMEOUT:g})"),
            Attribute("phase", String(), computed=True, description="requested, approved, ready, failed, ..."),
            Attribute("namespace", String(), computed=True, description="Host namespace (tenant-<slug>)"),
            Attribute("generation", Number(), computed=True, description="Spec generation"),
        ])

    @staticmethod
    def state(tenant: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        approve = config.get("approve")
        if approve is None or approve is Unknown:
            approve = tenant["phase"] != "requested"
        return {"id": str(tenant["id"]), "slug": tenant["slug"], "display_name": tenant["display_name"],
                "trust_level": tenant["trust_level"], "approve": approve,
                "timeout": config.get("timeout"), "phase": tenant["phase"], "namespace": tenant["namespace"],
                "generation": tenant["generation"]}

    def _settle(self, ctx: Any, tenant: dict[str, Any], config: dict[str, Any], *, want_generation: bool) -> Any:
        """Wait until an approved tenant is ready (or failed); a requested one is reported, not waited for."""
        if tenant["phase"] == "requested":
            ctx.diagnostics.add_warning(
                f"tenant '{tenant['slug']}' awaits approval by a platform admin",
                "It is created in phase 'requested'. A platform admin approves it in the portal or with "
                "POST /api/v1/tenants/{id}/approve/ (or set approve = true with a platform-admin token).")
            return tenant
        timeout = float(config.get("timeout") or DEFAULT_TIMEOUT)

        def done(t: dict[str, Any]) -> bool:
            if want_generation and t["phase"] == "ready":
                return bool(t["observed_generation"] >= t["generation"])
            return t["phase"] in SETTLED | GONE | {"suspended"}

        tenant = self.client.wait(f"tenant '{tenant['slug']}' to become ready",
                                  lambda: self.client.get(f"tenants/{tenant['id']}/"), done, timeout)
        if tenant["phase"] == "failed":
            self.partial = self.state(tenant, config)
            ctx.diagnostics.add_error(f"tenant '{tenant['slug']}' failed", condition_message(tenant))
        return tenant

    def _approve(self, tenant: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.client.post(f"tenants/{tenant['id']}/approve/")  # type: ignore[no-any-return]
        except ApiError as exc:
            if exc.status == 403:
                raise ApiError(403, "approve = true needs a platform-admin token; the tenant stays requested "
                               "until a platform admin approves it", {"approve": [exc.detail]}) from exc
            raise

    @guarded("creating the tenant")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        body = {"slug": planned["slug"], "trust_level": planned["trust_level"]}
        if planned.get("display_name") not in (None, Unknown):
            body["display_name"] = planned["display_name"]
        tenant = self.client.post("tenants/", body)
        self.partial = self.state(tenant, planned)
        if planned.get("approve") is True and tenant["phase"] == "requested":
            tenant = self._approve(tenant)
            self.partial = self.state(tenant, planned)
        tenant = self._settle(ctx, tenant, planned, want_generation=False)
        return self.state(tenant, planned)

    @guarded("reading the tenant")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            tenant = self.client.get(f"tenants/{current['id']}/")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        if tenant["phase"] in GONE:  # deleted or rejected outside Terraform: plan a new one
            return None
        return self.state(tenant, current)

    def plan(self, ctx: PlanContext, current: dict[str, Any] | None, planned: dict[str, Any]) -> dict[str, Any]:
        if current is not None and ctx.changed_fields & {"display_name", "trust_level", "approve"}:
            planned["generation"] = Unknown
            planned["phase"] = Unknown
        return planned

    @guarded("updating the tenant")
    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        self.partial = current
        body = {k: planned[k] for k in ("display_name", "trust_level")
                if planned.get(k) not in (None, Unknown) and planned[k] != current.get(k)}
        tenant = self.client.patch(f"tenants/{current['id']}/", body) if body else \
            self.client.get(f"tenants/{current['id']}/")
        if planned.get("approve") is True and tenant["phase"] == "requested":
            tenant = self._approve(tenant)
        tenant = self._settle(ctx, tenant, planned, want_generation=True)
        return self.state(tenant, planned)

    @guarded("deleting the tenant")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"tenants/{current['id']}/")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        timeout = float(current.get("timeout") or DEFAULT_TIMEOUT)
        self.client.wait(f"tenant '{current['slug']}' to be torn down",
                         lambda: self.client.get(f"tenants/{current['id']}/"),
                         lambda t: t["phase"] == "deleted", timeout)
        return None

    @guarded("importing the tenant")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        tenant = self.client.find("tenants", slug=id)
        if tenant is None or tenant["phase"] in GONE:
            ctx.diagnostics.add_error(f"no tenant '{id}' visible to this token")
            return None
        return self.state(tenant, {})


class TenantMember(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "tenant_member"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A user's role in a tenant.", attributes=[
            Attribute("id", String(), computed=True),
            Attribute("tenant", String(), required=True, requires_replace=True, description="Tenant slug"),
            Attribute("user", String(), required=True, requires_replace=True, description="Username"),
            Attribute("role", String(), required=True, description="owner, admin, member or viewer"),
        ])

    @staticmethod
    def state(row: dict[str, Any]) -> dict[str, Any]:
        return {"id": str(row["id"]), "tenant": row["tenant"], "user": row["user"], "role": row["role"]}

    @guarded("adding the member")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        return self.state(self.client.post("members/", {k: planned[k] for k in ("tenant", "user", "role")}))

    @guarded("reading the member")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.state(self.client.get(f"members/{current['id']}/"))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    @guarded("changing the member's role")
    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        self.partial = current
        return self.state(self.client.patch(f"members/{current['id']}/", {"role": planned["role"]}))

    @guarded("removing the member")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"members/{current['id']}/")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return None

    @guarded("importing the member")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        key = split_key(ctx.diagnostics, id, "user")
        if key is None:
            return None
        row = self.client.find("members", tenant=key[0], user=key[1])
        if row is None:
            ctx.diagnostics.add_error(f"'{key[1]}' is not a member of tenant '{key[0]}' (or it is not visible)")
            return None
        return self.state(row)
