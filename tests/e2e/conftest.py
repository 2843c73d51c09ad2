"""Opt-in suite against a real Kubernetes cluster: set GPUFLEET_E2E_KUBECONFIG to run it.

Without a cluster it skips with the reason, also in CI: no kube-apiserver can run on these
machines, so this is the one skip that is by design. It calls pytest.skip directly instead of
tests.support.services.missing, so GPUFLEET_REQUIRE_SERVICES does not turn it into a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from infra.kube.backend import KubernetesBackend

KUBECONFIG = os.environ.get("GPUFLEET_E2E_KUBECONFIG", "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def e2e_backend() -> KubernetesBackend:
    if not KUBECONFIG:
        pytest.skip("e2e: set GPUFLEET_E2E_KUBECONFIG to a kubeconfig of a disposable cluster to run these")
    from kubernetes import config

    api = config.new_client_from_config(config_file=KUBECONFIG, context=os.environ.get("GPUFLEET_E2E_CONTEXT"))
    return KubernetesBackend(api)


@pytest.fixture
def e2e_owner(e2e_backend: KubernetesBackend) -> Iterator[str]:
    """A throwaway tenant owner; everything it owns is pruned afterwards, whatever the test did."""
    slug = f"e2e-{uuid.uuid4().hex[:8]}"
    yield slug
    try:
        e2e_backend.apply(f"tenant:{slug}", [])
    except Exception:  # best effort: a namespace still terminating is removed by the cluster anyway
        pass
