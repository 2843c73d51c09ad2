"""Node health tests: the Kubernetes emulator (nodes, pods, PDBs, evictions, NodeClaims) and a real
VictoriaMetrics holding the DCGM health traces (one per session, its own storage)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.kube.conftest import _reconcile_driven_by_the_test, kube, kube_backend  # noqa: F401
from tests.support.victoriametrics import VictoriaMetrics


@pytest.fixture(scope="session")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    vm = VictoriaMetrics.start(Path(tmp_path_factory.mktemp("nodehealth-victoria-metrics")))
    yield vm
    vm.stop()


def create(url: str, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
    """POST an object to the emulator as a client would (kubectl create)."""
    response = requests.post(f"{url}{collection}", json=obj, timeout=5)
    assert response.status_code in (200, 201), response.text
    return response.json()


def get(url: str, path: str) -> dict[str, Any] | None:
    response = requests.get(f"{url}{path}", timeout=5)
    return None if response.status_code == 404 else response.json()
