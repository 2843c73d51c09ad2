"""KubernetesBackend against kmock's emulator over real HTTP: SSA requests, ordered prune, error sorting.

What the emulator cannot prove (real SSA merge semantics, admission, structural pruning) is listed in
docs/kubernetes-backend.md; tests/e2e runs the same backend against a real cluster.
"""

from __future__ import annotations

import kmock
import pytest
from kubernetes.client import ApiClient, Configuration

from infra.errors import PermanentError, TransientError
from infra.kube.backend import APPLY_CONTENT_TYPE, KubernetesBackend
from infra.manifests import Owner
from tests.support.services import free_port

from .emulator import EmulatorThread

ACME = Owner("tenant", "acme")
OTHER = Owner("tenant", "other")


def ns(owner: Owner = ACME, name: str = "tenant-acme") -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(owner.labels)}}


def quota(name: str = "backstop", owner: Owner = ACME, namespace: str = "tenant-acme", pods: str = "10") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(owner.labels)},
        "spec": {"hard": {"pods": pods}},
    }


def local_queue(owner: Owner = ACME) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "tenant-acme", "labels": dict(owner.labels)},
        "spec": {"clusterQueue": "acme"},
    }


def release(owner: Owner = ACME) -> dict:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "vcluster", "namespace": "tenant-acme", "labels": dict(owner.labels)},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "vcluster"}}},
    }


def requests_of(kube: EmulatorThread, method: str) -> list:
    return [r for r in kube.emulator._requests if str(r.method).upper().endswith(method)]


def stored(kube: EmulatorThread) -> set[tuple[str, str | None, str]]:
    return {
        (resource.plural, namespace, name)
        for (resource, namespace, name), obj in kube.emulator.objects.items()
        if not obj.deleted
    }


def test_apply_uses_server_side_apply_in_kind_order(kube: EmulatorThread, kube_backend: KubernetesBackend) -> None:
    result = kube_backend.apply(str(ACME), [release(), quota(), local_queue(), ns()])
    assert sorted(result.created) == sorted([
        "Namespace.core/-/tenant-acme",
        "ResourceQuota.core/tenant-acme/backstop",
        "LocalQueue.kueue.x-k8s.io/tenant-acme/default",
        "HelmRelease.helm.toolkit.fluxcd.io/tenant-acme/vcluster",
    ])
    patches = requests_of(kube, "PATCH")
    assert [r.url.path for r in patches] == [
        "/api/v1/namespaces/tenant-acme",
        "/api/v1/namespaces/tenant-acme/resourcequotas/backstop",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/tenant-acme/localqueues/default",
        "/apis/helm.toolkit.fluxcd.io/v2/namespaces/tenant-acme/helmreleases/vcluster",
    ]
    for request in patches:
        assert request.headers["Content-Type"] == APPLY_CONTENT_TYPE
        assert request.params["fieldManager"] == "gpufleet"
        assert request.params["force"] == "true"
    assert kube.emulator.objects[kmock.resource("", "v1", "resourcequotas"), "tenant-acme", "backstop"][
        "spec"
    ] == {"hard": {"pods": "10"}}
    assert kube_backend.owned(str(ACME)) == sorted(result.created)


def test_reapply_is_unchanged_and_a_change_is_an_update(kube: EmulatorThread, kube_backend: KubernetesBackend) -> None:
    kube_backend.apply(str(ACME), [ns(), quota()])
    again = kube_backend.apply(str(ACME), [ns(), quota()])
    assert again.created == [] and again.updated == [] and not again.changed
    changed = kube_backend.apply(str(ACME), [ns(), quota(pods="20")])
    assert changed.updated == ["ResourceQuota.core/tenant-acme/backstop"]


def test_prune_deletes_only_objects_with_the_owner_labels(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    kube_backend.apply(str(ACME), [ns(), quota(), quota("second")])
    kube_backend.apply(str(OTHER), [ns(OTHER, "tenant-other"), quota(owner=OTHER, namespace="tenant-other")])
    # Someone's hand-made quota in our namespace, and one that copies only part of our labels.
    stranger = quota("hand-made")
    stranger["metadata"]["labels"] = {}
    partial = quota("half-labelled")
    partial["metadata"]["labels"] = {"gpufleet.io/tenant": "acme"}
    rq = kmock.resource("", "v1", "resourcequotas")
    kube.call(lambda: kube.emulator.objects.__setitem__((rq, "tenant-acme", "hand-made"), stranger))
    kube.call(lambda: kube.emulator.objects.__setitem__((rq, "tenant-acme", "half-labelled"), partial))

    result = kube_backend.apply(str(ACME), [ns(), quota()])

    assert result.pruned == ["ResourceQuota.core/tenant-acme/second"]
    assert [r.url.path for r in requests_of(kube, "DELETE")] == [
        "/api/v1/namespaces/tenant-acme/resourcequotas/second"
    ]
    assert {("resourcequotas", "tenant-acme", "hand-made"), ("resourcequotas", "tenant-acme", "half-labelled"),
            ("resourcequotas", "tenant-other", "backstop"), ("namespaces", None, "tenant-other")} <= stored(kube)


def test_teardown_deletes_in_reverse_kind_order_namespace_last(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    kube_backend.apply(str(ACME), [ns(), quota(), local_queue(), release()])
    result = kube_backend.apply(str(ACME), [])
    assert [r.url.path for r in requests_of(kube, "DELETE")] == [
        "/apis/helm.toolkit.fluxcd.io/v2/namespaces/tenant-acme/helmreleases/vcluster",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/tenant-acme/localqueues/default",
        "/api/v1/namespaces/tenant-acme/resourcequotas/backstop",
        "/api/v1/namespaces/tenant-acme",
    ]
    assert len(result.pruned) == 4
    assert kube_backend.owned(str(ACME)) == []


def test_prune_waits_for_finalizers_before_deleting_the_namespace(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    held = release()
    held["metadata"]["finalizers"] = ["finalizers.fluxcd.io"]
    kube_backend.apply(str(ACME), [ns(), quota(), held])
    with pytest.raises(TransientError, match="waiting for HelmRelease"):
        kube_backend.apply(str(ACME), [])
    assert ("namespaces", None, "tenant-acme") in stored(kube)
    assert [r.url.path for r in requests_of(kube, "DELETE")] == [
        "/apis/helm.toolkit.fluxcd.io/v2/namespaces/tenant-acme/helmreleases/vcluster"
    ]
    # The controller finishes its cleanup and drops the finalizer; the next reconcile goes on.
    hr = kmock.resource("helm.toolkit.fluxcd.io", "v2", "helmreleases")
    kube.call(lambda: kube.emulator.objects[hr, "tenant-acme", "vcluster"].delete())
    kube_backend.apply(str(ACME), [])
    assert kube_backend.owned(str(ACME)) == []


@pytest.mark.parametrize("status", [409, 500, 503])
def test_conflict_and_server_errors_are_transient_then_retried(
    kube: EmulatorThread, kube_backend: KubernetesBackend, status: int
) -> None:
    kube.call(lambda: kube.emulator["patch"][:1] << kmock.KubernetesError(
        status=status, reason="Conflict" if status == 409 else "InternalError",
        message="Operation cannot be fulfilled: the object has been modified"))
    with pytest.raises(TransientError, match=f"HTTP {status}: Operation cannot be fulfilled"):
        kube_backend.apply(str(ACME), [ns(), quota()])
    # What the task's retry does: run the same apply again; the server answers normally now.
    result = kube_backend.apply(str(ACME), [ns(), quota()])
    assert kube_backend.owned(str(ACME)) == ["Namespace.core/-/tenant-acme", "ResourceQuota.core/tenant-acme/backstop"]
    assert not result.pruned


def test_throttling_is_transient_with_the_servers_retry_after(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    kube.call(lambda: kube.emulator["patch"][:1] << 429 << {"Retry-After": "7"} << {
        "kind": "Status", "code": 429, "message": "too many requests, please try again later"})
    with pytest.raises(TransientError, match="HTTP 429: too many requests") as info:
        kube_backend.apply(str(ACME), [ns()])
    assert info.value.delay == 7.0


def test_invalid_object_is_permanent_with_the_api_message(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    message = 'ResourceQuota "backstop" is invalid: spec.hard[pods]: Invalid value: "ten": quantities must match'
    kube.call(lambda: kube.emulator["patch", kmock.resource("", "v1", "resourcequotas")] << kmock.KubernetesError(
        status=422, reason="Invalid", message=message))
    with pytest.raises(PermanentError) as info:
        kube_backend.apply(str(ACME), [ns(), quota(pods="ten")])
    assert message in str(info.value)
    assert "422" in str(info.value)


def test_unlabelled_object_and_unserved_kind_are_refused(kube_backend: KubernetesBackend) -> None:
    bare = quota()
    bare["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpufleet"}
    with pytest.raises(PermanentError, match="lacks the owner labels"):
        kube_backend.apply(str(ACME), [ns(), bare])
    odd = {"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "tenant-acme", "labels": dict(ACME.labels)}}
    with pytest.raises(PermanentError, match=r"does not serve Widget in example\.com/v1"):
        kube_backend.apply(str(ACME), [ns(), odd])


def test_unreachable_api_server_is_transient() -> None:
    configuration = Configuration()
    configuration.host = f"http://127.0.0.1:{free_port()}"
    configuration.retries = 0
    backend = KubernetesBackend(ApiClient(configuration), timeout=(1.0, 1.0))
    with pytest.raises(TransientError):
        backend.apply(str(ACME), [ns()])


def test_selective_prune_deletes_only_what_is_selected_and_writes_nothing(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    kube_backend.apply(str(ACME), [ns(), quota(), release()])
    patches = len(requests_of(kube, "PATCH"))
    result = kube_backend.prune(str(ACME), lambda obj: obj.kind == "HelmRelease")
    assert result.pruned == ["HelmRelease.helm.toolkit.fluxcd.io/tenant-acme/vcluster"]
    assert len(requests_of(kube, "PATCH")) == patches
    assert kube_backend.owned(str(ACME)) == ["Namespace.core/-/tenant-acme", "ResourceQuota.core/tenant-acme/backstop"]


def test_from_access_without_a_cluster_is_a_clear_permanent_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from infra.kube.backend import KubeAccess

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PermanentError, match="cannot configure the Kubernetes client"):
        KubernetesBackend.from_access(KubeAccess(kubeconfig="", context=""))
    with pytest.raises(PermanentError, match="cannot configure the Kubernetes client"):
        KubernetesBackend.from_access(KubeAccess(kubeconfig=str(tmp_path / "absent")))


def test_an_object_applied_under_another_version_of_its_group_is_not_pruned(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    """A real server serves one LocalQueue under v1beta1 and v1beta2; the allowlist lists v1beta2.

    Rendering v1beta1 must neither list the kind twice nor prune the object it just applied."""
    kube.call(lambda: kube.emulator.resources.__setitem__(
        "kueue.x-k8s.io/v1beta1/localqueues", kmock.ResourceInfo(kind="LocalQueue", namespaced=True)))
    old = local_queue()
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    kube_backend.apply(str(ACME), [ns(), old])
    again = kube_backend.apply(str(ACME), [ns(), old])
    assert again.pruned == [] and requests_of(kube, "DELETE") == []
    lists = [r.url.path for r in kube.emulator._requests
             if str(r.method).upper().endswith("GET") and r.url.path.endswith("/localqueues")]
    assert lists and all("/v1beta1/" in path for path in lists)
