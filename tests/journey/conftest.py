from __future__ import annotations

import pytest

from tests.support.services import need_reference

from .fleet import PATCHED_SYNCER, Fleet, render_fleet
from .steps import vcluster_sync


@pytest.fixture
def fleet() -> Fleet:
    """The fleet as the platform is meant to run: with a syncer that keeps Kueue's gate."""
    return render_fleet(vcluster_syncer_image=PATCHED_SYNCER)


@pytest.fixture(scope="session")
def chart_defaults() -> dict:
    return vcluster_sync.chart_defaults(need_reference())
