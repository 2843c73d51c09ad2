"""The kmock emulator on a loopback port, and a KubernetesBackend pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration

from infra.kube.backend import KubernetesBackend
from tests.secrets.conftest import bao_server  # noqa: F401 - the real OpenBao server, shared with tests/secrets

from .emulator import EmulatorThread


@pytest.fixture
def kube() -> Iterator[EmulatorThread]:
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
