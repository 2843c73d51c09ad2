"""Shared bits for the isolation tests."""

from __future__ import annotations

from typing import Any

from tenants.isolation.config import IsolationSettings
from tenants.render import RenderContext, TenantView, render_tenant

ISO = IsolationSettings(oidc_issuer="https://login.gpufleet.test", oidc_client_id="vcluster-test")


def view(trust_level: str, slug: str | None = None, **fields: Any) -> TenantView:
    return TenantView(slug=slug or f"t-{trust_level}", display_name="x", trust_level=trust_level,
                      phase="ready", generation=1, **fields)


def ctx() -> RenderContext:
    return RenderContext(extra={"isolation": ISO})


def rendered(trust_level: str, **fields: Any) -> list[dict[str, Any]]:
    return render_tenant(view(trust_level, **fields), ctx())


def find(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    for m in manifests:
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name):
            return m
    raise AssertionError(f"no {kind} {name or ''} in {[(m['kind'], m['metadata']['name']) for m in manifests]}")


def pod(namespace: str, limits: dict[str, Any], *, init: bool = False, requests_only: bool = False) -> dict[str, Any]:
    resources = {"requests": limits} if requests_only else {"limits": limits}
    container = {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04", "resources": resources}
    spec: dict[str, Any] = {"containers": [{"name": "side", "image": "busybox:1.36"}]}
    if init:
        spec["initContainers"] = [container]
    else:
        spec["containers"].append(container)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job", "namespace": namespace}, "spec": spec}
