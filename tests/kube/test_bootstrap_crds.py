"""Issue 26 B2, the kube backend's path: on a fresh cluster the platform's tree holds HelmReleases that install
CRDs and custom resources of those CRDs. The backend applies the releases first, then waits -- a TransientError
with a delay, the task retries -- until the CRDs are Established, and never stops with a PermanentError.

The emulator plays the API server of a fresh cluster: Kueue's kinds are not served (discovery does not list
them) until the test, playing helm-controller, installs the CRDs; the CRD objects carry the Established
condition the API server sets once it serves them (apiextensions-apiserver's establishing controller)."""

from __future__ import annotations

import kmock
import pytest

from infra.errors import PermanentError, TransientError
from infra.kube.backend import CRD_PATH, KubernetesBackend
from infra.manifests import INSTALLS_CRDS, Owner

from .emulator import EmulatorThread

PLATFORM = Owner("platform")
KUEUE_CRDS = ("resourceflavors.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io")


def kueue_release() -> dict:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "kueue", "namespace": "flux-system", "labels": dict(PLATFORM.labels),
                         "annotations": {INSTALLS_CRDS: ",".join(KUEUE_CRDS)}},
            "spec": {"interval": "10m", "releaseName": "kueue", "chartRef": {"kind": "OCIRepository",
                                                                               "name": "kueue"}}}


def flavor() -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "h100", "labels": dict(PLATFORM.labels)}, "spec": {}}


def fresh(kube: EmulatorThread) -> dict:
    """Take Kueue's kinds away from discovery; returns them for `install`."""
    def remove() -> dict:
        gone = {k: v for k, v in kube.emulator.resources.items() if k.group == "kueue.x-k8s.io"}
        for key in gone:
            del kube.emulator.resources[key]
        return gone
    return kube.call(remove)


def install(kube: EmulatorThread, backend: KubernetesBackend, kinds: dict, *, established: bool) -> None:
    """What helm-controller and the API server do: the CRD objects, then (Established) the kinds served."""
    for name in KUEUE_CRDS:
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
               "status": {"conditions": [{"type": "Established", "status": "True" if established else "False"}]}}
        backend._call("PATCH", CRD_PATH + name, query=[("fieldManager", "helm")], body=crd,
                      content_type="application/apply-patch+yaml")
    if established:
        kube.call(lambda: kube.emulator.resources.update(kinds))


def patched(kube: EmulatorThread) -> list[str]:
    return [r.url.path for r in kube.emulator._requests if str(r.method).upper().endswith("PATCH")]


def test_a_fresh_cluster_converges_release_first_then_the_custom_resources(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    kinds = fresh(kube)
    # Before: ResourceFlavor ranks before HelmRelease (KIND_ORDER) and `_require` raised PermanentError.
    with pytest.raises(TransientError, match="waiting for the CRDs") as first:
        kube_backend.apply(str(PLATFORM), [flavor(), kueue_release()])
    assert first.value.delay >= 10
    assert "resourceflavors.kueue.x-k8s.io from HelmRelease flux-system/kueue" in str(first.value)
    assert patched(kube)[-1] == "/apis/helm.toolkit.fluxcd.io/v2/namespaces/flux-system/helmreleases/kueue"

    install(kube, kube_backend, kinds, established=False)  # created, not yet served: still waiting
    with pytest.raises(TransientError, match="waiting for the CRDs"):
        kube_backend.apply(str(PLATFORM), [flavor(), kueue_release()])

    install(kube, kube_backend, kinds, established=True)
    result = kube_backend.apply(str(PLATFORM), [flavor(), kueue_release()])
    assert "ResourceFlavor.kueue.x-k8s.io/-/h100" in result.created
    assert patched(kube)[-2:] == ["/apis/helm.toolkit.fluxcd.io/v2/namespaces/flux-system/helmreleases/kueue",
                                  "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/h100"]


def test_a_kind_no_release_of_ours_installs_is_still_a_permanent_error(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    fresh(kube)
    release = kueue_release()
    del release["metadata"]["annotations"]
    with pytest.raises(PermanentError, match="does not serve ResourceFlavor"):
        kube_backend.apply(str(PLATFORM), [flavor(), release])


def test_the_tenants_vcluster_release_stays_after_its_policies(
    kube: EmulatorThread, kube_backend: KubernetesBackend
) -> None:
    """Only releases that install CRDs move to the front: a tenant's vCluster (no annotation) still comes last."""
    from .test_backend import ACME, local_queue, ns, quota, release

    kube_backend.apply(str(ACME), [release(), quota(), local_queue(), ns()])
    assert patched(kube)[-1].endswith("/helmreleases/vcluster")
    assert kmock  # the emulator module is in use
