"""The Kubernetes backend against a real API server: what kmock cannot prove (see docs/kubernetes-backend.md).

- real server-side apply: the field manager `gpufleet` owns the fields it applied (managedFields,
  operation Apply); another manager's field survives our re-apply (SSA merges, it does not replace);
- the API server's own validation: an invalid quantity is a 422 reported as PermanentError;
- real deletion: the namespace is deleted last and the owner has nothing left afterwards.
"""

from __future__ import annotations

import time

import pytest

from infra.errors import PermanentError, TransientError
from infra.kube.backend import KubernetesBackend
from infra.manifests import Owner


def objects(slug: str, pods: str = "10") -> list[dict]:
    labels = dict(Owner("tenant", slug).labels)
    ns = f"tenant-{slug}"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "backstop", "namespace": ns,
         "labels": labels}, "spec": {"hard": {"pods": pods}}},
        {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": ns,
         "labels": labels}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}},
    ]


def read(backend: KubernetesBackend, path: str) -> dict:
    return backend._call("GET", path)


def test_apply_is_server_side_apply_owned_by_gpufleet(e2e_backend: KubernetesBackend, e2e_owner: str) -> None:
    owner = f"tenant:{e2e_owner}"
    created = e2e_backend.apply(owner, objects(e2e_owner))
    assert len(created.created) == 3
    again = e2e_backend.apply(owner, objects(e2e_owner))
    assert not again.changed, again.summary()
    quota = read(e2e_backend, f"/api/v1/namespaces/tenant-{e2e_owner}/resourcequotas/backstop")
    managers = {(m["manager"], m["operation"]) for m in quota["metadata"]["managedFields"]}
    assert ("gpufleet", "Apply") in managers

    # Another manager adds a field we do not render; our next apply must keep it (a merge).
    e2e_backend._call(
        "PATCH", f"/api/v1/namespaces/tenant-{e2e_owner}/resourcequotas/backstop",
        query=[("fieldManager", "someone-else")], content_type="application/merge-patch+json",
        body={"spec": {"hard": {"services": "5"}}},
    )
    e2e_backend.apply(owner, objects(e2e_owner, pods="20"))
    hard = read(e2e_backend, f"/api/v1/namespaces/tenant-{e2e_owner}/resourcequotas/backstop")["spec"]["hard"]
    assert hard["pods"] == "20" and hard["services"] == "5"


def test_invalid_object_is_a_permanent_error_with_the_api_message(
    e2e_backend: KubernetesBackend, e2e_owner: str
) -> None:
    with pytest.raises(PermanentError, match="quantities must match"):
        e2e_backend.apply(f"tenant:{e2e_owner}", objects(e2e_owner, pods="ten"))


def test_teardown_removes_everything_namespace_last(e2e_backend: KubernetesBackend, e2e_owner: str) -> None:
    owner = f"tenant:{e2e_owner}"
    e2e_backend.apply(owner, objects(e2e_owner))
    for _ in range(60):  # a real namespace takes a while to terminate: the reconcile requeues meanwhile
        try:
            e2e_backend.apply(owner, [])
        except TransientError:
            pass
        if not e2e_backend.owned(owner):
            break
        time.sleep(2)
    assert e2e_backend.owned(owner) == []
