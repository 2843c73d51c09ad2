"""A reconcile that raises never leaves Ready or Reconciled true for the generation it failed (issue 27,
item 5). The failure is the one the probe met: a cluster whose gitops_path git refuses (`.git/hooks`, written
before one validator guarded every write path), so every apply there raised a ValueError while the tenant
stayed Ready=True and its placement Reconciled=True."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.models import Cluster, Placement
from tenants.fleet import reconcile_fleet
from tenants.models import Tenant
from tenants.reconcile import reconcile_tenant
from tests.support.services import need_binary

pytestmark = pytest.mark.django_db(transaction=True)


def _statuses(tenant: Tenant) -> dict[str, tuple[str, str]]:
    out = {}
    for placement in Placement.objects.filter(tenant=tenant).select_related("cluster"):
        cond = placement.condition("Reconciled")
        out[placement.cluster.name] = (cond["status"], cond["reason"])
    return out


def _ready(tenant: Tenant) -> dict[str, str]:
    tenant.refresh_from_db()
    return next(c for c in tenant.conditions if c["type"] == "Ready")


def _break_inference(acme: Tenant) -> int:
    """The generation that will fail."""
    # As a row written before the validator (the API now refuses it): the reconcile meets it as it is.
    Cluster.objects.filter(name="inference").update(gitops_path=".git/hooks")
    Tenant.objects.filter(pk=acme.pk).update(generation=acme.generation + 1)
    return acme.generation + 1


@pytest.mark.parametrize("path", ["tenant", "fleet"])
def test_a_reconcile_that_raises_leaves_no_true_status(placed, gitops_repo: Path, path: str) -> None:
    need_binary("git")
    assert reconcile_fleet().errors == []
    acme = Tenant.objects.get(slug="acme")
    assert _ready(acme)["status"] == "True"
    assert _statuses(acme) == {"training": ("True", "Applied"), "inference": ("True", "Applied")}
    failing = _break_inference(acme)

    if path == "tenant":
        with pytest.raises(ValueError, match="bad cluster folder"):
            reconcile_tenant(acme.pk)
    else:
        result = reconcile_fleet()
        assert any("bad cluster folder" in e for e in result.errors), result.errors

    ready = _ready(acme)
    assert (ready["status"], ready["reason"]) == ("False", "ReconcileError")
    assert f"generation {failing}" in ready["message"] and "bad cluster folder" in ready["message"]
    assert acme.generation == failing and acme.observed_generation == failing - 1  # not observed
    statuses = _statuses(acme)
    assert statuses["inference"] == ("False", "ReconcileError")
    assert statuses["training"] == ("True", "Applied"), "the cluster that took the objects says so"
    sandbox = Tenant.objects.get(slug="sandbox")
    assert _ready(sandbox)["status"] == "True", "a tenant not on the broken cluster is untouched"

    # Repaired: the next reconcile is Ready again.
    Cluster.objects.filter(name="inference").update(gitops_path="")
    reconcile_tenant(acme.pk)
    assert _ready(acme)["status"] == "True"
    assert _statuses(acme) == {"training": ("True", "Applied"), "inference": ("True", "Applied")}
