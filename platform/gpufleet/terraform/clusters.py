"""gpufleet_cluster and gpufleet_placement.

A cluster is changed in place (PATCH with If-Match: the ETag read just before, so a concurrent change is a
412 diagnostic, never silently overwritten) and deleted only when empty. A placement is a reviewed change in
the API: create proposes `add` and approves it, delete proposes `remove` and approves it -- both need a
platform-admin token (a tenant admin proposes in the portal or API and waits for review).
"""

from __future__ import annotations

from typing import Any

from tf.iface import CreateContext, DeleteContext, ImportContext, ReadContext, Resource, UpdateContext
from tf.schema import Attribute, Schema
from tf.types import List, String, Unknown

from .client import ApiError
from .common import Base, guarded, split_key

TEXT = ("purpose", "region", "region_name", "gitops_path", "kube_api", "kubeconfig_secret", "metrics_url",
        "metrics_label")
LISTS = ("zones", "trust_levels")
PLACEMENT_HINT = ("Placing a tenant needs a platform-admin token. As a tenant owner or admin, propose it instead "
                  "(POST /api/v1/placement-requests/ or the portal); a platform admin reviews it.")


def removing(placement: dict[str, Any]) -> bool:
    """A removed placement stays listed (condition `Removing`) until its objects on the cluster are pruned."""
    return any(c.get("type") == "Removing" for c in placement.get("conditions") or [])


class Cluster(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "cluster"

    @classmethod
    def get_schema(cls) -> Schema:
        optional = {"optional": True, "computed": True}
        return Schema(version=0, description="A host cluster (platform admins).", attributes=[
            Attribute("id", String(), computed=True),
            Attribute("name", String(), required=True, requires_replace=True, description="Kubernetes DNS label"),
            Attribute("purpose", String(), **optional, description="training, inference, dev or general"),
            Attribute("region", String(), **optional, description="Region id, e.g. eu-west-1"),
            Attribute("region_name", String(), **optional, description="Human name of the region"),
            Attribute("zones", List(String()), **optional, description="Availability zones"),
            Attribute("trust_levels", List(String()), **optional,
                      description="Tenant trust levels it may host (empty: every level)"),
            Attribute("gitops_path", String(), **optional, description="Its tree in the GitOps repository"),
            Attribute("kube_api", String(), **optional, description="API server URL (Kubernetes backend)"),
            Attribute("kubeconfig_secret", String(), **optional,
                      description="NAME of the Secret or file holding its credentials (never the credentials)"),
            Attribute("metrics_url", String(), **optional, description="Its own metrics source"),
            Attribute("metrics_label", String(), **optional, description="Value of the `cluster` label"),
            Attribute("tree", String(), computed=True, description="Effective GitOps tree (clusters/<name>)"),
        ])

    @staticmethod
    def state(row: dict[str, Any]) -> dict[str, Any]:
        out = {"id": str(row["id"]), "name": row["name"], "tree": row["tree"]}
        for key in TEXT:
            out[key] = row.get(key) if row.get(key) is not None else ""
        for key in LISTS:
            out[key] = list(row.get(key) or [])
        return out

    @staticmethod
    def body(planned: dict[str, Any]) -> dict[str, Any]:
        return {k: planned[k] for k in (*TEXT, *LISTS) if planned.get(k) is not None and planned[k] is not Unknown}

    @guarded("registering the cluster")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        return self.state(self.client.post("clusters/", {"name": planned["name"], **self.body(planned)}))

    @guarded("reading the cluster")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.state(self.client.get(f"clusters/{current['name']}/"))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    @guarded("changing the cluster")
    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        path = f"clusters/{current['name']}/"
        etag = self.client.request("GET", path).headers.get("ETag", "*")
        response = self.client.request("PATCH", path, json=self.body(planned), headers={"If-Match": etag})
        return self.state(response.json())

    @guarded("removing the cluster")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            self.client.delete(f"clusters/{current['name']}/")
        except ApiError as exc:
            if exc.status != 404:
                raise
        return None

    @guarded("importing the cluster")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        return self.state(self.client.get(f"clusters/{id}/"))


class Placement(Base, Resource):
    @classmethod
    def get_name(cls) -> str:
        return "placement"

    @classmethod
    def get_schema(cls) -> Schema:
        return Schema(version=0, description="A tenant placed on a (non-home) cluster: its namespace, queues and "
                      "policies rendered there. Applied through an approved placement request.", attributes=[
            Attribute("id", String(), computed=True),
            Attribute("tenant", String(), required=True, requires_replace=True, description="Tenant slug"),
            Attribute("cluster", String(), required=True, requires_replace=True, description="Cluster name"),
            Attribute("reason", String(), optional=True, description="Recorded on the placement requests"),
        ])

    @staticmethod
    def state(row: dict[str, Any], reason: Any = None) -> dict[str, Any]:
        return {"id": str(row["id"]), "tenant": row["tenant"], "cluster": row["cluster"],
                "reason": None if reason is Unknown else reason}

    def _change(self, tenant: str, cluster: str, action: str, reason: Any) -> None:
        body = {"tenant": tenant, "cluster": cluster, "action": action}
        if isinstance(reason, str):
            body["reason"] = reason
        try:
            proposal = self.client.post("placement-requests/", body)
        except ApiError as exc:
            if exc.status == 403:
                raise ApiError(403, PLACEMENT_HINT, {"cluster": [f"{exc.detail}. {PLACEMENT_HINT}"]}) from exc
            raise
        try:
            self.client.post(f"placement-requests/{proposal['id']}/approve/", {"comment": "terraform"})
        except ApiError as exc:
            if exc.status == 403:
                waiting = (f"placement request {proposal['id']} ({action} {cluster}) was proposed and waits for a "
                           "platform admin's review; this token may not approve it")
                raise ApiError(403, waiting, {"cluster": [waiting]}) from exc
            raise

    @guarded("placing the tenant")
    def create(self, ctx: CreateContext, planned: dict[str, Any]) -> dict[str, Any] | None:
        self._change(planned["tenant"], planned["cluster"], "add", planned.get("reason"))
        row = self.client.find("placements", tenant=planned["tenant"], cluster=planned["cluster"])
        if row is None or removing(row):
            raise ApiError(0, f"placement of {planned['tenant']} on {planned['cluster']} not found after approval")
        return self.state(row, planned.get("reason"))

    @guarded("reading the placement")
    def read(self, ctx: ReadContext, current: dict[str, Any]) -> dict[str, Any] | None:
        try:
            row = self.client.get(f"placements/{current['id']}/")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return None if removing(row) else self.state(row, current.get("reason"))

    def update(self, ctx: UpdateContext, current: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any] | None:
        return {**current, "reason": planned.get("reason")}  # only the note changed; nothing to ask the API

    @guarded("removing the placement")
    def delete(self, ctx: DeleteContext, current: dict[str, Any]) -> None:
        try:
            row = self.client.get(f"placements/{current['id']}/")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        if removing(row):
            return None
        self._change(current["tenant"], current["cluster"], "remove", current.get("reason"))
        return None

    @guarded("importing the placement")
    def import_(self, ctx: ImportContext, id: str) -> dict[str, Any] | None:
        key = split_key(ctx.diagnostics, id, "cluster")
        if key is None:
            return None
        row = self.client.find("placements", tenant=key[0], cluster=key[1])
        if row is None or removing(row):
            ctx.diagnostics.add_error(f"tenant '{key[0]}' is not placed on '{key[1]}' (or it is not visible)")
            return None
        return self.state(row)
