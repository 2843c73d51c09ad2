from __future__ import annotations

import pytest

from tests.support.services import need_reference

from .fleet import OPTIONS, Fleet, render_fleet
from .steps import vcluster_sync

# The fleet the GPU journeys run on: the shipped defaults with a syncer that keeps Kueue's gate (without one the
# platform refuses GPU pods, issue 26 B3: test_shipped_defaults.py), alone and with each other documented option.
GPU_OPTION_SETS = {
    "patched-syncer": ("patched-syncer",),
    "patched-syncer+topology-levels": ("patched-syncer", "topology-levels"),
    "patched-syncer+fair-sharing": ("patched-syncer", "fair-sharing"),
}


def fleet_with(*options: str) -> Fleet:
    changes: dict = {}
    for option in options:
        changes.update(OPTIONS[option])
    return render_fleet(**changes)


@pytest.fixture(params=sorted(GPU_OPTION_SETS))
def fleet(request) -> Fleet:
    return fleet_with(*GPU_OPTION_SETS[request.param])


@pytest.fixture(scope="session")
def chart_defaults() -> dict:
    return vcluster_sync.chart_defaults(need_reference())
