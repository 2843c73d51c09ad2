"""On a real cluster (GPUFLEET_E2E_KUBECONFIG): `gpufleet doctor` reads it without writing and every
finding has a check name; the cluster meets the matrix only if it was installed from the platform's
output, so failures are reported, not asserted away (the report is the product here)."""

from __future__ import annotations

import pytest

from infra.kube.backend import KubernetesBackend
from scheduling.doctor import diagnose
from scheduling.inputs import Catalog

pytestmark = pytest.mark.django_db


def test_doctor_reads_a_real_cluster(e2e_backend: KubernetesBackend) -> None:
    findings = diagnose(e2e_backend.read, Catalog())
    assert findings and all(f.check and f.detail for f in findings)
    assert all(f.fix for f in findings if not f.ok)
    # The CRD checks always run: a real cluster answers each with a definite verdict.
    assert any(f.check.startswith("crd/") for f in findings)
