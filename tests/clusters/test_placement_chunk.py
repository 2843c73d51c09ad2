"""A fleet pass records its chunk's placement status in bulk (`scheduling.clusters.delivery.placement_chunk`): the
rows are read once, each record costs no query, and the writes at the chunk's end leave exactly what the
record-as-you-go path leaves."""

from __future__ import annotations

from typing import Any

import pytest

from infra.errors import UnreachableError
from scheduling.clusters import delivery
from scheduling.models import Placement
from tenants.render import Placed

pytestmark = pytest.mark.django_db


def _state() -> dict[tuple[str, str], tuple[Any, ...]]:
    return {(p.tenant.slug, p.cluster.name): ([{**c, "lastTransitionTime": ""} for c in p.conditions],
                                              p.last_reconciled_at is not None)
            for p in Placement.objects.select_related("tenant", "cluster")}


def _records(placed: dict) -> list[tuple[Any, Placed, Any]]:
    acme, sandbox = placed["acme"], placed["sandbox"]
    return [
        (acme, Placed("training", "clusters/training", None, None), None),
        (acme, Placed("inference", "clusters/inference", None, None), UnreachableError("connection refused")),
        (sandbox, Placed("dev", "clusters/dev", None, None), None),
        (acme, Placed("inference", "clusters/inference", None, None), None),  # recorded twice: the last wins
    ]


def test_chunk_records_cost_no_query_each_and_equal_the_direct_writes(placed, django_assert_num_queries) -> None:
    Placement.objects.update(conditions=[], last_reconciled_at=None)
    cleared = _state()
    for tenant, where, error in _records(placed):
        delivery.record_placement(tenant, where, error)
    direct = _state()
    assert direct != cleared

    Placement.objects.update(conditions=[], last_reconciled_at=None)
    delivery._MARKED_REACHABLE.clear()
    with delivery.placement_chunk(list(placed.values())):
        for tenant, where, error in _records(placed):
            delivery.record_placement(tenant, where, error)
        assert _state() == cleared, "placement rows are written when the chunk ends"
        with django_assert_num_queries(0):  # preloaded row, cluster marked reachable moments ago
            delivery.record_placement(placed["acme"], Placed("training", "clusters/training", None, None), None)
    assert _state() == direct
