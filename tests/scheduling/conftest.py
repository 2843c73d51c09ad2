"""Catalog fixtures: one GPU model with a whole, a MIG and a HAMi flavor, and tenants of each trust level."""

from __future__ import annotations

import pytest

from scheduling import actions
from tenants.models import Phase
from tests.support import factories


@pytest.fixture
def fleet(db):
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    whole = actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    mig = actions.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=14)
    hami = actions.create_flavor("h100-quarter", gpu_model=model.name, mode="hami", memory_percent=25,
                                 cores_percent=25, capacity=32)
    return {"model": model, "whole": whole, "mig": mig, "hami": hami}


@pytest.fixture
def tenants(db):
    return {
        level: factories.tenant(f"t-{level}", level, phase=Phase.READY)
        for level in ("untrusted", "standard", "trusted")
    }
