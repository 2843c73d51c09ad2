"""Kubernetes backend with one client per host cluster (three kmock API servers, one of them gone): an
unreachable cluster marks its own tenants' placements, never blocks the others."""

from __future__ import annotations

import gc
import socket
import warnings
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration

from gpufleet.core.errors import ActionError
from infra.errors import PermanentError, TransientError
from infra.kube.backend import KubernetesBackend
from infra.kube.clusters import PerClusterBackend, kubeconfig_path
from scheduling.clusters import placement_actions as placing
from scheduling.models import Cluster, Placement
from tenants import reconcile
from tenants.models import Phase, Tenant
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db(transaction=True)


class Gone:
    """A cluster whose API nobody answers any more: a loopback port that was free a moment ago."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def emulators() -> Iterator[dict[str, str]]:
    need_reference()
    pytest.importorskip("kmock")
    from tests.kube.emulator import EmulatorThread

    running = {name: EmulatorThread().start() for name in ("training", "dev")}
    try:
        # URLs only: the emulator objects must be unreferenced when the fixture collects them below.
        yield {**{name: emulator.url for name, emulator in running.items()}, "inference": Gone().url}
    finally:
        for api in OPEN:  # close keep-alive connections before their server goes (else a ResourceWarning later)
            api.close()
        OPEN.clear()
        for emulator in running.values():
            emulator.stop()
        running.clear()
        # kmock leaves its listening socket to the garbage collector: finalize it here, not in a later test.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


OPEN: list[ApiClient] = []


def client(url: str) -> KubernetesBackend:
    configuration = Configuration()
    configuration.host = url
    configuration.retries = 0
    OPEN.append(ApiClient(configuration))
    return KubernetesBackend(OPEN[-1], timeout=(2.0, 5.0))


def test_an_unreachable_cluster_marks_its_own_placements_only(placed, emulators) -> None:
    try:
        _unreachable_cluster(placed, emulators)
    finally:
        # The refused connections' sockets and tracebacks are garbage now: finalize them here, under this
        # test, so no later test sees their ResourceWarning.
        for api in OPEN:
            api.close()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()


def _unreachable_cluster(placed, emulators) -> None:  # type: ignore[no-untyped-def]
    built: list[str] = []

    def factory(name: str):  # type: ignore[no-untyped-def]
        def make() -> KubernetesBackend:
            built.append(name)
            return client(emulators[name])
        return make

    backend = PerClusterBackend({f"clusters/{n}": factory(n) for n in ("training", "inference", "dev")},
                                names={f"clusters/{n}": n for n in ("training", "inference", "dev")})
    acme, sandbox = placed["acme"], placed["sandbox"]

    with pytest.raises(TransientError, match="inference"):
        reconcile.reconcile_tenant(acme.pk, backend=backend)
    assert "clusters/inference" in backend.down
    # acme's home cluster has its control plane and queues; the untrusted-only cluster has nothing of it.
    on_training = backend.owned("clusters/training/tenant:acme")
    assert any(k.startswith("HelmRelease.") for k in on_training) and any("ClusterQueue" in k for k in on_training)
    assert backend.owned("clusters/dev/tenant:acme") == []
    cond = Placement.objects.get(tenant=acme, cluster__name="inference").condition("Reconciled")
    assert (cond["status"], cond["reason"]) == ("False", "ClusterUnreachable")
    assert Placement.objects.get(tenant=acme, cluster__name="training").condition("Reconciled")["status"] == "True"
    assert Cluster.objects.get(name="inference").reachable is False
    tenant = Tenant.objects.get(pk=acme.pk)
    assert tenant.phase != Phase.READY and tenant.condition("Ready")["status"] == "False"

    # A tenant that is not on the unreachable cluster is reconciled as if nothing happened.
    outcome = reconcile.reconcile_tenant(sandbox.pk, backend=backend)
    assert outcome.phase == Phase.READY, outcome.summary
    assert any(k.startswith("HelmRelease.") for k in backend.owned("clusters/dev/tenant:sandbox"))
    assert backend.owned("clusters/training/tenant:sandbox") == []
    # One client per cluster, each built once; the dead one is not asked again in this pass.
    assert sorted(built) == ["dev", "inference", "training"]
    with pytest.raises(TransientError, match="unreachable"):
        backend.owned("clusters/inference/tenant:acme")


def test_an_unconfigured_cluster_is_a_permanent_error_naming_it() -> None:
    backend = PerClusterBackend({}, names={})
    with pytest.raises(PermanentError, match="no Kubernetes API is configured"):
        backend.apply("clusters/x/tenant:acme", [])


def test_credentials_are_referenced_never_stored(db) -> None:
    assert kubeconfig_path("train-kubeconfig", "/var/run/gpufleet/clusters") == \
        "/var/run/gpufleet/clusters/train-kubeconfig/kubeconfig"
    assert kubeconfig_path("/etc/gpufleet/train.yaml", "/x") == "/etc/gpufleet/train.yaml"
    with pytest.raises(PermanentError):
        kubeconfig_path("../secrets", "/x")
    with pytest.raises(ActionError) as refused:
        placing.create_cluster("train", kubeconfig_secret="apiVersion: v1\nkind: Config\nusers: [...]")
    assert list(refused.value.errors) == ["kubeconfig_secret"]
    with pytest.raises(ActionError) as refused:
        placing.create_cluster("Train_1", purpose="gaming", trust_levels=["root"], gitops_path="../x")
    assert set(refused.value.errors) == {"name", "purpose", "trust_levels", "gitops_path"}
