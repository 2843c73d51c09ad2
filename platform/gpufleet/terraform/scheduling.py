"""gpufleet_quota and gpufleet_inference_endpoint."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute, Schema
from tf.types import Bool, Number, String, Unknown

from .client import ApiError
from .common import Base, guarded, split_key

QUOTA_REQUEST_HINT = (
    "Setting a quota directly needs a platform-admin token. As a tenant owner or admin, ask for it with a "
    "quota request instead (POST /api/v1/quota-requests/ with the same tenant, flavor and numbers, or the "
    "portal's GPU flavors page → your tenant); a platform admin reviews and approves it."
)


def number(value: Any) -> int | float | None:
    """API numbers (ints, or decimals sent as strings) as Terraform numbers, without float noise."""
    if value is None:
        return None
    exact = Decimal(str(value))
    return int(exact) if exact == exact.to_integral_value() else float(exact)


LIMITS = ("borrowing_limit", "lending_limit")


def known(value: Any) -> bool:
    """A value the configuration sets: not left out (Unknown while planned, computed)."""
    return value is not Unknown


class Quota(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "quota"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A tenant's GPU quota for one flavor (Kueue nominal/borrowing/lending).",
                      attributes=[
            Attribute("id", String(), computed=True),
            Attribute("tenant", String(), required=True, requires_replace=True, description="Tenant slug"),
            Attribute("flavor", String(), required=True, requires_replace=True, description="Flavor name"),
            Attribute("cluster", String(), optional=True, computed=True, requires_replace=True,
                      description="Host cluster (default: the tenant's home cluster)"),
            Attribute("nominal", Number(), required=True, description="Guaranteed units"),
            # Optional and computed: a limit the configuration does not set is left as it is (an approved quota
            # request or an admin may have set it); Terraform keeps the value it read (issue 27).
            Attribute("borrowing_limit", Number(), optional=True, computed=True,
                      description="Units it may borrow (null: no limit). Not set: kept as it is"),
            Attribute("lending_limit", Number(), optional=True, computed=True,
                      description="Units it may lend (null: all unused). Not set: kept as it is"),
        ])

    def validate(self, diags: Any, type_name: str, config: dict[str, Any]) -> None:
        """Refuse a negative or fractional quota at `terraform plan`, not halfway through an apply (the API
        would refuse it too, but only once earlier resources were already created)."""
        super().validate(diags, type_name, config)
        for name in ("nominal", "borrowing_limit", "lending_limit"):
            value = config.get(name)
            if value is None or value is Unknown:  # not set, or known only at apply
                continue
            exact = Decimal(str(value))
            if exact < 0 or exact != exact.to_integral_value():
                diags.add_error(f"{name} must be a whole number of units, 0 or more (got {value})",
                                "Quotas are counted in whole units of the flavor (GPUs, MIG instances or shares).",
                                path=[name])

    @staticmethod
    def state(row: dict[str, Any]) -> dict[str, Any]:
        return {"id": str(row["id"]), "tenant": row["tenant"], "flavor": row["flavor"], "cluster": row["cluster"],
                "nominal": number(row["nominal"]), "borrowing_limit": number(row["borrowing_limit"]),
                "lending_limit": number(row["lending_limit"])}

    def _set(self, planned: dict[str, Any]) -> dict[str, Any]:
        """Create: POST (create-or-replace) only when no quota exists yet for (tenant, flavor, cluster);
        otherwise PATCH it, so limits the configuration leaves out keep their value."""
        existing = self._existing(planned)
        if existing is not None:
            return self._patch(str(existing["id"]), {k: planned.get(k) for k in ("nominal", *LIMITS)})
        body = {k: planned.get(k) for k in ("tenant", "flavor", "nominal")}
        body.update({k: planned[k] for k in LIMITS if known(planned.get(k))})
        if isinstance(planned.get("cluster"), str) and planned["cluster"]:
            body["cluster"] = planned["cluster"]
        return self.state(self._hinted(lambda: self.client.post("quotas/", body)))

    def _existing(self, planned: dict[str, Any]) -> dict[str, Any] | None:
        cluster = planned.get("cluster")
        if not (isinstance(cluster, str) and cluster):
            homes = [p for p in self.client.get("placements/", tenant=planned["tenant"]).get("results", [])
                     if p.get("home")]
            # No home placement: the server puts the quota on the `default` cluster (scheduling.actions).
            cluster = homes[0]["cluster"] if homes else "default"
        return self.client.find("quotas", tenant=planned["tenant"], flavor=planned["flavor"], cluster=cluster)

    def _patch(self, quota_id: str, wanted: dict[str, Any]) -> dict[str, Any]:
        """PATCH the numbers that differ from the quota as read just now, with that read's ETag as If-Match: a
        change made meanwhile is a 412, never overwritten, and a limit not set in the configuration is not sent."""
        path = f"quotas/{quota_id}/"
        read = self.client.request("GET", path)
        row = read.json()
        body = {k: v for k, v in wanted.items() if known(v) and number(row.get(k)) != v}
        if not body:
            return self.state(row)
        headers = {"If-Match": read.headers.get("ETag", "*")}
        return self.state(self._hinted(lambda: self.client.request("PATCH", path, json=body, headers=headers).json()))

    @staticmethod
    def _hinted(call: Any) -> Any:
        try:
            return call()
        except ApiError as exc:
            if exc.status == 403:
                raise ApiError(403, QUOTA_REQUEST_HINT, {"nominal": [f"{exc.detail}. {QUOTA_REQUEST_HINT}"]}) from exc
            raise

    @guarded("setting the quota")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        return self._set(planned)

    @guarded("reading the quota")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.state(self.client.get(f"quotas/{current['id']}/"))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    @guarded("changing the quota")
    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        self.partial = current
        return self._patch(current["id"], {k: planned.get(k) for k in ("nominal", *LIMITS)})

    @guarded("removing the quota")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"quotas/{current['id']}/")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return None

    @guarded("importing the quota")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        # <slug>/<flavor> (the first such quota, e.g. a single-cluster fleet's) or <slug>/<flavor>/<cluster>
        head, cluster = (id.rsplit("/", 1) if id.count("/") == 2 else (id, ""))
        key = split_key(ctx.diagnostics, head, "flavor")
        if key is None:
            return None
        filters = {"tenant": key[0], "flavor": key[1], **({"cluster": cluster} if cluster else {})}
        row = self.client.find("quotas", **filters)
        if row is None:
            where = f" on cluster '{cluster}'" if cluster else ""
            ctx.diagnostics.add_error(f"tenant '{key[0]}' has no quota for flavor '{key[1]}'{where} "
                                      "(or it is not visible)")
            return None
        return self.state(row)


class InferenceEndpoint(Base, Resource):
    """Endpoints have no update in the API: any change replaces the endpoint (a new Deployment anyway)."""

    @classmethod
    def get_name(cls) -> str:
        return "inference_endpoint"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A scale-to-zero vLLM inference endpoint (KEDA) of a tenant.",
                      attributes=[
            Attribute("id", String(), computed=True),
            Attribute("tenant", String(), required=True, requires_replace=True, description="Tenant slug"),
            Attribute("name", String(), required=True, requires_replace=True, description="DNS label"),
            Attribute("model", String(), required=True, requires_replace=True, description="Served model name"),
            Attribute("tier", String(), required=True, requires_replace=True, description="SLA tier name"),
            Attribute("deployment", String(), optional=True, computed=True, requires_replace=True,
                      description="Deployment to scale (defaults to the name)"),
            Attribute("queue_target", Number(), optional=True, computed=True, requires_replace=True,
                      description="Waiting requests per replica (default 5)"),
            Attribute("kv_cache_target", Number(), optional=True, computed=True, requires_replace=True,
                      description="KV-cache use per replica, 0.05-1 (default 0.8)"),
            # A gated model (Llama, Mistral...) needs the tenant's Hugging Face token: its pods wait for it in
            # the tenant's secret store. The API refuses `gated` without a store, on `gated`.
            Attribute("gated", Bool(), optional=True, computed=True, requires_replace=True,
                      description="The model is gated on Hugging Face: pods wait for the tenant's token "
                                  "(default false)"),
        ])

    @staticmethod
    def state(row: dict[str, Any]) -> dict[str, Any]:
        return {"id": str(row["id"]), "tenant": row["tenant"], "name": row["name"], "model": row["model"],
                "tier": row["tier"], "deployment": row["deployment"], "queue_target": number(row["queue_target"]),
                "kv_cache_target": number(row["kv_cache_target"]), "gated": bool(row["gated"])}

    @guarded("creating the inference endpoint")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        body = {k: v for k, v in planned.items() if k != "id" and v is not None and v is not Unknown}
        # Terraform's msgpack carries a number that is not an exact float (0.8) as text; the API takes JSON
        # numbers only (docs/api.md, strict types).
        body.update({k: number(body[k]) for k in ("queue_target", "kv_cache_target") if k in body})
        return self.state(self.client.post("endpoints/", body))

    @guarded("reading the inference endpoint")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.state(self.client.get(f"endpoints/{current['id']}/"))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        ctx.diagnostics.add_error("inference endpoints are replaced, not updated (this is a provider bug)")
        return current

    @guarded("deleting the inference endpoint")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"endpoints/{current['id']}/")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return None

    @guarded("importing the inference endpoint")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        key = split_key(ctx.diagnostics, id, "name")
        if key is None:
            return None
        row = self.client.find("endpoints", tenant=key[0], name=key[1])
        if row is None:
            ctx.diagnostics.add_error(f"tenant '{key[0]}' has no endpoint '{key[1]}' (or it is not visible)")
            return None
        return self.state(row)
