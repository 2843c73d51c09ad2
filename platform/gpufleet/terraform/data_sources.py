"""Data sources: gpufleet_flavors, gpufleet_tenant, gpufleet_kubeconfig, gpufleet_usage."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tf.iface import DataSource, ReadDataContext
from tf.schema import Attribute, Schema
from tf.types import List, Number, String

from .common import Base, Object, guarded
from .scheduling import number


def _all(client: Any, collection: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of a cursor-paginated collection (follows `next`)."""
    page = client.get(f"{collection}/", **params)
    rows = list(page["results"])
    while page.get("next"):
        page = client.session.get(page["next"], headers={"Authorization": f"Bearer {client.token}"},
                                  timeout=client.timeout, verify=client.ca_bundle or True).json()
        rows.extend(page["results"])
    return rows


class Flavors(Base, DataSource):
    @classmethod
    def get_name(cls) -> str:
        return "flavors"

    @classmethod
    def get_schema(cls) -> Schema:
        item = Object({"name": String(), "mode": String(), "gpu_model": String()})
        return Schema(version=0, description="The GPU catalog.", attributes=[
            Attribute("mode", String(), optional=True, description="Only flavors of this mode (whole, mig, hami)"),
            Attribute("flavors", List(item), computed=True, description="name, mode, gpu_model; sorted by name"),
        ])

    @guarded("reading the flavors")
    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        rows = _all(self.client, "flavors", mode=config.get("mode"))
        flavors = sorted(({"name": r["name"], "mode": r["mode"], "gpu_model": r["gpu_model"]} for r in rows),
                         key=lambda f: f["name"])
        return {"mode": config.get("mode"), "flavors": flavors}


class TenantData(Base, DataSource):
    @classmethod
    def get_name(cls) -> str:
        return "tenant"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A tenant, by slug.", attributes=[
            Attribute("slug", String(), required=True),
            Attribute("id", String(), computed=True),
            Attribute("display_name", String(), computed=True),
            Attribute("trust_level", String(), computed=True),
            Attribute("phase", String(), computed=True),
            Attribute("namespace", String(), computed=True),
            Attribute("generation", Number(), computed=True),
        ])

    @guarded("reading the tenant")
    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        tenant = self.client.find("tenants", slug=config["slug"])
        if tenant is None:
            ctx.diagnostics.add_error(f"no tenant '{config['slug']}' visible to this token", path=["slug"])
            return None
        return {k: tenant[k] for k in ("slug", "display_name", "trust_level", "phase", "namespace", "generation")} \
            | {"id": str(tenant["id"])}


class Kubeconfig(Base, DataSource):
    @classmethod
    def get_name(cls) -> str:
        return "kubeconfig"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="The kubeconfig of a tenant's vCluster (OIDC exec plugin, no secrets).",
                      attributes=[
            Attribute("tenant", String(), required=True, description="Tenant slug"),
            Attribute("kubeconfig", String(), computed=True),
        ])

    @guarded("reading the kubeconfig")
    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        tenant = self.client.find("tenants", slug=config["tenant"])
        if tenant is None:
            ctx.diagnostics.add_error(f"no tenant '{config['tenant']}' visible to this token", path=["tenant"])
            return None
        response = self.client.request("GET", f"tenants/{tenant['id']}/kubeconfig/",
                                       headers={"Accept": "application/yaml, */*"})
        return {"tenant": config["tenant"], "kubeconfig": response.text}


class Usage(Base, DataSource):
    @classmethod
    def get_name(cls) -> str:
        return "usage"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A tenant's measured GPU usage and invoiced cost for a month.",
                      attributes=[
            Attribute("tenant", String(), required=True, description="Tenant slug"),
            Attribute("period", String(), required=True, description="YYYY-MM"),
            Attribute("gpu_seconds", Number(), computed=True, description="GPU-equivalent seconds"),
            Attribute("unit_seconds", Number(), computed=True, description="Flavor-unit seconds"),
            Attribute("cost", String(), computed=True,
                      description="Total of the period's invoice (exact decimal), null before it is drafted"),
            Attribute("currency", String(), computed=True),
        ])

    @guarded("reading the usage")
    def read(self, ctx: ReadDataContext, config: dict[str, Any]) -> dict[str, Any] | None:
        usage = self.client.get("billing/usage/", tenant=config["tenant"], period=config["period"])
        gpu = sum((Decimal(r["gpu_equivalent_seconds"]) for r in usage["rows"]), Decimal(0))
        units = sum((Decimal(r["unit_seconds"]) for r in usage["rows"]), Decimal(0))
        invoices = [i for i in _all(self.client, "billing/invoices", tenant=config["tenant"], period=config["period"])
                    if i["state"] != "void"]
        invoice = invoices[-1] if invoices else None
        return {"tenant": config["tenant"], "period": config["period"], "gpu_seconds": number(gpu),
                "unit_seconds": number(units), "cost": invoice["total"] if invoice else None,
                "currency": invoice["currency"] if invoice else None}
