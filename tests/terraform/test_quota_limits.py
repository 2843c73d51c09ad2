"""gpufleet_quota keeps the limits its configuration does not set (issue 27, item 4), with the real `terraform`
binary against a live gpufleet: a quota whose limits came from elsewhere (an approved request, an admin) is
adopted and changed with PATCH + If-Match, never reset to "no limit" by a POST of only `nominal`."""

from __future__ import annotations

import pytest

from scheduling import actions as sched
from scheduling.models import Quota
from tests.support import factories

from .harness import Workspace

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def config(nominal: int, lending: int | None = None) -> str:
    lending_line = f"\n  lending_limit = {lending}" if lending is not None else ""
    return f'''
provider "gpufleet" {{}}

resource "gpufleet_quota" "q" {{
  tenant  = "vision"
  flavor  = "a100"
  nominal = {nominal}{lending_line}
}}
'''


def numbers(tenant) -> tuple[int, int | None, int | None]:
    quota = Quota.objects.get(tenant=tenant, flavor__name="a100")
    return quota.nominal, quota.borrowing_limit, quota.lending_limit


def test_limits_the_configuration_leaves_out_are_kept(platform, tmp_path) -> None:
    tenant = factories.tenant("vision", "standard", phase="ready", owner=platform.owner)
    sched.set_quota(tenant, flavor="a100", nominal=2, borrowing_limit=3, lending_limit=1)
    ws = Workspace(tmp_path, platform.url, platform.admin_token)

    ws.write(config(nominal=4))
    ws.apply()  # adopts the existing quota: only nominal changes
    assert numbers(tenant) == (4, 3, 1)
    assert ws.plan()[0] == 0

    # Changed outside Terraform: a limit it does not manage is no drift, and the next change keeps it.
    sched.set_quota(tenant, flavor="a100", nominal=4, borrowing_limit=5, lending_limit=1)
    assert ws.plan()[0] == 0
    ws.write(config(nominal=3))
    ws.apply()
    assert numbers(tenant) == (3, 5, 1)

    # A limit it does set is applied, and the other still kept.
    ws.write(config(nominal=3, lending=0))
    ws.apply()
    assert numbers(tenant) == (3, 5, 0)
    assert ws.plan()[0] == 0
