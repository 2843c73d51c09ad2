"""The kmock emulator on a loopback port, and a KubernetesBackend pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration

from infra.kube.backend import KubernetesBackend
from tests.secrets.conftest import bao_server  # noqa: F401 - the real OpenBao server, shared with tests/secrets
from tests.support.services import need_reference

from .emulator import EmulatorThread


@pytest.fixture
def kube() -> Iterator[EmulatorThread]:
    # The emulator serves the CRDs from the upstream reference data; without it every call would answer
    # "CRD not installed?". Skip (or fail in CI) with the same message as the other schema tests.
    need_reference()
    try:
        import kmock  # noqa: F401
    except ImportError:
        from tests.support.services import missing

        missing("PyPI `kmock` (Kubernetes API emulator) is not installed")
    emulator = EmulatorThread().start()
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture
def kube_backend(kube: EmulatorThread) -> KubernetesBackend:
    configuration = Configuration()
    configuration.host = kube.url
    configuration.retries = 0  # urllib3 must not hide the server's answers behind its own retries
    return KubernetesBackend(ApiClient(configuration), timeout=(2.0, 5.0))


@pytest.fixture(autouse=True)
def _reconcile_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests call the reconcile themselves (with the backend under test). The task an action
    enqueues on commit would only sit in the broker, where another suite's real worker would later
    run it against its own repository; so actions here enqueue nothing."""
    monkeypatch.setattr("tenants.actions._enqueue_reconcile", lambda tenant_id: None)
