"""Which optional capability (infra/backend.py) each backend offers, as docs/architecture.md's table says."""

from __future__ import annotations

import pytest

from infra import backend as capabilities
from infra.gitops.backend import GitOpsBackend
from infra.kube.backend import KubernetesBackend
from infra.kube.clusters import PerClusterBackend

ALL = (capabilities.ReadsSecrets, capabilities.AppliesFiles, capabilities.Publishes, capabilities.KnowsCommitted,
       capabilities.PrunesSelectively, capabilities.OrderedTeardown, capabilities.ComparesInSync,
       capabilities.Fingerprints, capabilities.ChecksFingerprints, capabilities.ChecksFingerprintsInBulk,
       capabilities.Batches, capabilities.Maintains, capabilities.ReportsRepositoryStatus)
GITOPS = {"AppliesFiles", "Publishes", "KnowsCommitted", "ComparesInSync", "Fingerprints", "ChecksFingerprints",
          "ChecksFingerprintsInBulk", "Batches", "Maintains", "ReportsRepositoryStatus"}
KUBERNETES = {"ReadsSecrets", "PrunesSelectively", "OrderedTeardown"}


def offered(backend: object) -> set[str]:
    return {capability.__name__ for capability in ALL if isinstance(backend, capability)}


@pytest.mark.parametrize(("cls", "expected"), [(GitOpsBackend, GITOPS), (KubernetesBackend, KUBERNETES),
                                               (PerClusterBackend, KUBERNETES)])
def test_each_backend_offers_its_capabilities(cls: type, expected: set[str]) -> None:
    assert offered(object.__new__(cls)) == expected  # the checks read the class's members, not its state


def test_a_method_set_to_none_turns_a_capability_off() -> None:
    class NoCheapCompare(GitOpsBackend):
        in_sync = None  # type: ignore[assignment]
        batch = None  # type: ignore[assignment]

    assert offered(object.__new__(NoCheapCompare)) == GITOPS - {"ComparesInSync", "Batches"}


def test_every_capability_is_documented() -> None:
    from pathlib import Path

    architecture = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    assert [c.__name__ for c in ALL if f"`{c.__name__}`" not in architecture] == []
    assert all(c.__doc__ for c in ALL)
