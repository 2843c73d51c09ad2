"""A small platform with one object behind every write route, and a snapshot of everything a write changes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from rest_framework.test import APIClient

from billing import actions as billing_actions
from gpufleet.audit.models import AuditEvent
from scheduling import actions as scheduling_actions
from tenants.models import Phase
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
    client = APIClient()
    client.force_authenticate(admin)
    return {"admin": admin, "client": client, "ready": ready, "requested": requested, "proposal": proposal,
            "quota": quota}


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


def _git(repo: Path, *args: str) -> str:
    if not (repo / ".git").exists():
        return ""
    if args[0] == "status":  # once a one-tenant commit's background index update is done
        from infra.gitops.git import Git

        Git(repo).settle_index()
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False).stdout


def snapshot(gitops_repo: Path) -> dict[str, Any]:
    """Row counts of every model, the audit trail's length, and the GitOps repository's commit and files."""
    counts = {m._meta.label: m._default_manager.count() for m in apps.get_models()
              if m._meta.app_label not in {"sessions", "contenttypes", "admin"}}
    return {"rows": counts, "audit": AuditEvent.objects.count(),
            "head": _git(gitops_repo, "rev-parse", "HEAD"), "status": _git(gitops_repo, "status", "--porcelain"),
            "files": sorted(str(p.relative_to(gitops_repo)) for p in gitops_repo.rglob("*")
                            if p.is_file() and ".git" not in p.parts) if gitops_repo.exists() else []}
