"""Deprovisioning through the real reconcile with the Kubernetes backend (kmock): ordered, resumable."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from infra.errors import TransientError
from infra.kube.backend import KubernetesBackend
from infra.manifests import kind_rank
from tenants import actions, reconcile, teardown
from tenants.models import Phase, Tenant
from tests.support import factories

from .emulator import RESOURCES, EmulatorThread

pytestmark = pytest.mark.django_db(transaction=True)


def kinds(keys: list[str]) -> set[str]:
    return {key.split(".", 1)[0] for key in keys}


def kind_of(path: str) -> str:
    """Kind of an object URL, from the plural the emulator serves (/api/v1/namespaces/x -> Namespace)."""
    plural = path.strip("/").split("/")[-2]  # .../<plural>/<name>
    return next(kind for key, (kind, _) in RESOURCES.items() if key.endswith("/" + plural))


def deletes(kube: EmulatorThread) -> list[str]:
    return [r.url.path for r in kube.emulator._requests if str(r.method).upper().endswith("DELETE")]


def provisioned(kube_backend: KubernetesBackend) -> Tenant:
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    outcome = reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)
    assert outcome.phase == Phase.READY, outcome.summary
    assert {"Namespace", "HelmRelease", "ResourceQuota"} <= kinds(kube_backend.owned("tenant:acme"))
    actions.delete(Tenant.objects.get(pk=tenant.pk))
    return tenant


def test_crash_mid_teardown_resumes_where_it_stopped(
    kube: EmulatorThread, kube_backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant = provisioned(kube_backend)
    owned_kinds = kinds(kube_backend.owned("tenant:acme"))
    ran: list[str] = []
    real = dict(teardown.STEPS)

    def tracking(name: str, crash: bool = False):
        def step(t: teardown.Teardown) -> None:
            ran.append(name)
            if crash:
                raise RuntimeError("worker killed")  # a crash, not an error the reconcile knows
            real[name](t)
        return step

    monkeypatch.setattr(teardown, "STEPS", MappingProxyType(
        {name: tracking(name, crash=name == "prune-policies-and-queues") for name in real}))

    with pytest.raises(RuntimeError, match="worker killed"):
        reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)

    tenant.refresh_from_db()
    assert tenant.phase == Phase.DEPROVISIONING
    assert tenant.condition("Deprovisioning")["step"] == "delete-vcluster"
    left = kinds(kube_backend.owned("tenant:acme"))
    assert "HelmRelease" not in left and {"Namespace", "ResourceQuota"} <= left
    # Step 1 stopped admission before anything was deleted: GPU quota 0 on the backstop quota.
    quota_patches = [
        r.data for r in kube.emulator._requests
        if str(r.method).upper().endswith("PATCH") and r.url.path.endswith("/resourcequotas/gpufleet-backstop")
    ]
    assert quota_patches[-1]["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    queue_patches = [
        r.data for r in kube.emulator._requests
        if str(r.method).upper().endswith("PATCH") and r.url.path.endswith("/clusterqueues/tenant-acme")
    ]
    if queue_patches:  # rendered when the scheduling app is installed
        assert queue_patches[-1]["spec"]["stopPolicy"] == "Hold"
    assert ran == ["stop-admission", "delete-vcluster", "prune-policies-and-queues"]

    monkeypatch.setattr(teardown, "STEPS", MappingProxyType(
        {**teardown.STEPS, "prune-policies-and-queues": tracking("prune-policies-and-queues")}))
    ran.clear()
    outcome = reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)

    assert outcome.phase == Phase.DELETED, outcome.summary
    assert ran == ["prune-policies-and-queues", "revoke-secrets", "delete-namespace"]  # no step redone twice
    assert kube_backend.owned("tenant:acme") == []
    paths = deletes(kube)
    assert paths[0].endswith("/helmreleases/vcluster")
    assert paths[-1] == "/api/v1/namespaces/tenant-acme"
    # Every DELETE in reverse KIND_ORDER: nothing is deleted after something it lives in or refers to.
    ranks = [kind_rank(kind_of(path)) for path in paths]
    assert ranks == sorted(ranks, reverse=True), list(zip(paths, ranks, strict=True))
    assert {kind_of(p) for p in paths} == owned_kinds
    tenant.refresh_from_db()
    assert tenant.condition("Deprovisioning")["reason"] == "Completed"
    assert tenant.condition("Secrets")["reason"] == "NotConfigured"


def test_teardown_waits_for_the_vcluster_release_to_be_gone(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    import kmock

    tenant = provisioned(kube_backend)
    hr = kmock.resource("helm.toolkit.fluxcd.io", "v2", "helmreleases")
    # Flux's finalizer: the release is uninstalled before the object goes away.
    kube.call(lambda: kube.emulator.objects[hr, "tenant-acme", "vcluster"].patch(
        {"metadata": {"finalizers": ["finalizers.fluxcd.io"]}}))

    with pytest.raises(TransientError, match="waiting for HelmRelease"):
        reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DEPROVISIONING
    assert tenant.condition("Deprovisioning")["step"] == "stop-admission"
    assert tenant.condition("Ready")["reason"] == "Retrying"
    assert not any(p == "/api/v1/namespaces/tenant-acme" for p in deletes(kube))

    kube.call(lambda: kube.emulator.objects[hr, "tenant-acme", "vcluster"].delete())  # Flux done
    outcome = reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)
    assert outcome.phase == Phase.DELETED
    assert kube_backend.owned("tenant:acme") == []


def test_openbao_is_revoked_after_the_queues_and_before_the_namespace(
    kube: EmulatorThread, kube_backend: KubernetesBackend, bao_server, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infra.openbao import OpenBao

    settings.GPUFLEET_OPENBAO_ADDR = bao_server.addr
    settings.GPUFLEET_OPENBAO_TOKEN = bao_server.root_token
    bao = OpenBao.connect(bao_server.addr, token=bao_server.root_token)
    tenant = provisioned(kube_backend)
    assert Tenant.objects.get(pk=tenant.pk).condition("Secrets")["reason"] == "Provisioned"
    assert bao.tenant_status("acme")["policy"] is True

    seen: dict[str, set[str]] = {}
    real = teardown.STEPS["revoke-secrets"]

    def revoke(t: teardown.Teardown) -> None:
        seen["left"] = kinds(kube_backend.owned("tenant:acme"))
        real(t)

    monkeypatch.setattr(teardown, "STEPS", MappingProxyType({**teardown.STEPS, "revoke-secrets": revoke}))
    assert reconcile.reconcile_tenant(tenant.pk, backend=kube_backend).phase == Phase.DELETED
    assert seen["left"] == {"Namespace"}  # queues, policies, vCluster gone; namespace still there
    assert bao.tenant_status("acme") == {"policy": False, "role": False, "data": False}
    assert kube_backend.owned("tenant:acme") == []


def test_vcluster_admin_kubeconfig_moves_from_the_cluster_into_openbao(
    kube: EmulatorThread, kube_backend: KubernetesBackend, bao_server, settings
) -> None:
    import base64

    import kmock

    from infra.openbao import OpenBao

    settings.GPUFLEET_OPENBAO_ADDR = bao_server.addr
    settings.GPUFLEET_OPENBAO_TOKEN = bao_server.root_token
    bao = OpenBao.connect(bao_server.addr, token=bao_server.root_token)
    tenant = factories.tenant("capture", "standard")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk, backend=kube_backend).phase == Phase.READY
    tenant.refresh_from_db()
    assert "not created yet" in tenant.condition("Secrets")["message"]
    assert bao.read_vcluster_admin("capture") is None

    # The vCluster chart writes its admin kubeconfig into the host namespace.
    kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vc-vcluster", "namespace": "tenant-capture"},
              "data": {"config": base64.b64encode(kubeconfig.encode()).decode()}}
    kube.call(lambda: kube.emulator.objects.__setitem__(
        (kmock.resource("", "v1", "secrets"), "tenant-capture", "vc-vcluster"), secret))
    reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)

    assert bao.read_vcluster_admin("capture") == kubeconfig
    tenant.refresh_from_db()
    assert "kept in OpenBao" in tenant.condition("Secrets")["message"]
    assert "clusters: []" not in str(list(Tenant.objects.filter(pk=tenant.pk).values()))


def test_a_tenant_never_provisioned_is_deleted_without_writing_anything(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    tenant = factories.tenant("ghost", "untrusted")
    actions.approve(tenant)
    actions.delete(Tenant.objects.get(pk=tenant.pk))  # deleted before any reconcile ran
    outcome = reconcile.reconcile_tenant(tenant.pk, backend=kube_backend)
    assert outcome.phase == Phase.DELETED
    assert not [r for r in kube.emulator._requests if str(r.method).upper().endswith(("PATCH", "DELETE"))]
    tenant.refresh_from_db()
    assert "nothing was provisioned" in tenant.condition("Deprovisioning")["message"]
