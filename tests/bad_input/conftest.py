"""A small platform with one object behind every write route, and a snapshot of everything a write changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.apps import apps
from rest_framework.test import APIClient

from billing import actions as billing_actions
from gpufleet.accounts.models import ApiToken
from gpufleet.audit.models import AuditEvent
from infra.gitops.git import Git
from scheduling import actions as scheduling_actions
from scheduling.clusters import actions as cluster_actions
from scheduling.clusters import placement_actions
from tenants.models import Membership, Phase
from tests.support import factories


@pytest.fixture
def world(db, settings) -> dict[str, Any]:
    model = scheduling_actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    scheduling_actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    admin = factories.user("root-admin", roles={"platform-admin", "billing-admin"})
    ready = factories.tenant("acme", "trusted", owner=admin, phase=Phase.READY)
    requested = factories.tenant("newbie", "standard", owner=admin)
    proposal = scheduling_actions.propose_quota_change(ready, flavor="h100", nominal=2, reason="more")
    quota = scheduling_actions.set_quota(ready, flavor="h100", nominal=1, borrowing_limit=2)
    billing_actions.set_price("h100", "2.50", "USD", "2026-01-01")
    # One object behind every other route too (api_routes below), so a body reaches its checks, not a 404.
    cluster_actions.create_cluster("edge", purpose="inference", region="eu-west-1")
    placement = placement_actions.propose_placement_change(ready, cluster="edge", action="add")
    endpoint = scheduling_actions.create_endpoint(ready, "llm", model="meta-llama/Llama-3.1-8B", tier="standard")
    _, prefix, digest = ApiToken.generate()
    token = ApiToken.objects.create(user=admin, name="probe", prefix=prefix, digest=digest)
    client = APIClient()
    client.force_authenticate(admin)
    return {"admin": admin, "client": client, "ready": ready, "requested": requested, "proposal": proposal,
            "quota": quota, "placement": placement, "endpoint": endpoint, "token": token,
            "member": Membership.objects.get(tenant=ready, user=admin)}


def write_routes(world: dict[str, Any]) -> list[tuple[str, str]]:
    """(method, path) of every API route that takes a body (platform/gpufleet/api/urls.py)."""
    t, r, q, quota = world["ready"].pk, world["requested"].pk, world["proposal"].pk, world["quota"].pk
    return [
        ("post", "/api/v1/tenants/"),
        ("patch", f"/api/v1/tenants/{t}/"),
        ("post", f"/api/v1/tenants/{r}/reject/"),
        ("patch", f"/api/v1/tenants/{t}/isolation/"),
        ("post", "/api/v1/tokens/"),
        ("patch", "/api/v1/gpu-allocation-policies/standard/"),
        ("post", "/api/v1/node-pools/"),
        ("post", "/api/v1/quotas/"),
        ("patch", f"/api/v1/quotas/{quota}/"),
        ("post", "/api/v1/quota-requests/"),
        ("post", f"/api/v1/quota-requests/{q}/approve/"),
        ("post", f"/api/v1/quota-requests/{q}/reject/"),
        ("post", "/api/v1/endpoints/"),
        ("post", "/api/v1/tenant-scheduling/"),
        ("post", "/api/v1/billing/prices/"),
        ("post", "/api/v1/billing/invoices/draft/"),
    ]


def api_schema(client: APIClient) -> dict[str, Any]:
    return yaml.safe_load(client.get("/api/v1/schema/").content)


def concrete_path(world: dict[str, Any], template: str) -> str:
    """`template` (an OpenAPI path) with each parameter replaced by the world's object of that route."""
    objects = {"tenants": world["ready"].pk, "members": world["member"].pk, "tokens": world["token"].pk,
               "quota-requests": world["proposal"].pk, "placement-requests": world["placement"].pk,
               "endpoints": world["endpoint"].pk, "clusters": "edge", "gpu-allocation-policies": "standard",
               "quotas": world["quota"].pk, "node-health": "gpu-a"}
    parts = template.strip("/").split("/")
    out = []
    for index, part in enumerate(parts):
        if part.startswith("{"):
            # Objects this world has none of (an invoice, a flavor...): an id nothing has, still a real route.
            part = str(objects.get(parts[index - 1], 999999))
        out.append(part)
    return "/" + "/".join(out) + "/"


def api_routes(world: dict[str, Any], methods: tuple[str, ...] = ("post", "patch", "put", "delete"),
               ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, concrete path, template, request body schema or {}) of every API operation the published
    document lists with one of `methods`: the routes are the document's, so a new route is covered unedited."""
    schema = api_schema(world["client"])
    components = schema["components"]["schemas"]
    routes = []
    for template, item in sorted(schema["paths"].items()):
        for method, operation in sorted(item.items()):
            if method not in methods:
                continue
            ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            body = components.get(ref.get("$ref", "").rsplit("/", 1)[-1], {}) if ref else {}
            routes.append((method, concrete_path(world, template), template, body))
    return routes


def _git(repo: Path, *args: str) -> str:
    if not (repo / ".git").exists():
        return ""
    if args[0] == "status":  # once a one-tenant commit's background index update is done
        Git(repo).settle_index()
    return Git(repo).run(*args, check=False)


def snapshot(gitops_repo: Path) -> dict[str, Any]:
    """Row counts of every model, the audit trail's length, and the GitOps repository's commit and files."""
    counts = {m._meta.label: m._default_manager.count() for m in apps.get_models()
              if m._meta.app_label not in {"sessions", "contenttypes", "admin"}}
    return {"rows": counts, "audit": AuditEvent.objects.count(),
            "head": _git(gitops_repo, "rev-parse", "HEAD"), "status": _git(gitops_repo, "status", "--porcelain"),
            "files": sorted(str(p.relative_to(gitops_repo)) for p in gitops_repo.rglob("*")
                            if p.is_file() and ".git" not in p.parts) if gitops_repo.exists() else []}
