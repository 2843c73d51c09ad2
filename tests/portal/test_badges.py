"""Badges say what a person needs: the phase first, and a switched-off feature is not a failure."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tenants.actions import _condition
from tenants.models import Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db


def row_of(page: str, slug: str) -> str:
    match = re.search(rf'<tr>\s*<td><a class="strong" href="/tenants/{slug}/">.*?</tr>', page, re.S)
    assert match, f"no row for {slug}"
    return match.group(0)


def test_tenant_list_badges_follow_the_phase(admin_client_, alice) -> None:
    deleted = factories.tenant("gone", "standard", owner=alice)
    Tenant.objects.filter(pk=deleted.pk).update(phase=Phase.DELETED, generation=2, observed_generation=2)
    requested = factories.tenant("asked", "standard", owner=alice)
    Tenant.objects.filter(pk=requested.pk).update(phase=Phase.REQUESTED, generation=1, observed_generation=0)
    ready = factories.tenant("running", "standard", owner=alice)
    Tenant.objects.filter(pk=ready.pk).update(phase=Phase.READY, generation=3, observed_generation=3)
    behind = factories.tenant("behind", "standard", owner=alice)
    Tenant.objects.filter(pk=behind.pk).update(phase=Phase.READY, generation=4, observed_generation=3)
    page = admin_client_.get(reverse("portal:tenant-list")).content.decode()

    gone = row_of(page, "gone")
    assert ">deleted<" in gone and "live" not in gone and 'data-testid="sync"' not in gone
    asked = row_of(page, "asked")
    assert ">requested<" in asked and ">awaiting approval<" in asked and "0 of 1" not in asked
    up = row_of(page, "running")
    assert ">ready<" in up and ">in sync<" in up and 'title="generation 3 is live"' in up
    lagging = row_of(page, "behind")
    assert ">syncing<" in lagging and "generation 4 not live yet; 3 applied" in lagging
    # The phase badge comes before the sync badge in every row.
    for row in (asked, up, lagging):
        assert row.index('data-testid="phase"') < row.index('data-testid="sync"')


def test_switched_off_openbao_is_disabled_not_a_red_false(alice_client, acme) -> None:
    conditions = [
        _condition("Ready", "True", "Applied", "16 created"),
        _condition("Secrets", "False", "NotConfigured", "OpenBao is not configured; secrets step skipped"),
        _condition("GpuModesAdmitted", "False", "Refused", "mode hami not allowed"),
    ]
    Tenant.objects.filter(pk=acme.pk).update(phase=Phase.READY, conditions=conditions)
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    statuses = re.findall(r'<span class="status status-(\w+)" data-testid="condition-status">(\w+)</span>', page)
    assert statuses == [("true", "True"), ("disabled", "Disabled"), ("false", "False")]
