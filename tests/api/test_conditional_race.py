"""Conditional writes under real concurrency (issue 27, item 3): many PATCHes sent at the same instant with the
same If-Match give exactly one 200 and the rest 412, on real PostgreSQL with one connection per thread.

Each thread is its own API client (its own database connection and transactions), as web workers are; a barrier
releases them together, as tests/billing/test_concurrency.py does.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from scheduling import actions as sched
from scheduling.clusters import placement_actions
from tenants.models import Membership, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db(transaction=True)
RACERS = 24  # enough to race reliably on 2 cores; each holds one PostgreSQL connection


def race(user: Any, url: str, etag: str, body_of: Callable[[int], dict[str, Any]]) -> Counter[int]:
    barrier = threading.Barrier(RACERS)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def patch(i: int) -> None:
        client = APIClient()
        client.force_authenticate(user)
        try:
            barrier.wait(30)
            statuses.append(client.patch(url, body_of(i), format="json", HTTP_IF_MATCH=etag).status_code)
        except BaseException as exc:  # reported below, with the statuses
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=patch, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return Counter(statuses)


def test_one_of_many_parallel_tenant_patches_with_one_if_match_wins():
    admin = factories.user("root", roles={"platform-admin"})
    tenant = factories.tenant("vision")
    client = APIClient()
    client.force_authenticate(admin)
    etag = client.get(f"/api/v1/tenants/{tenant.pk}/")["ETag"]
    statuses = race(admin, f"/api/v1/tenants/{tenant.pk}/", etag, lambda i: {"display_name": f"Vision {i}"})
    assert statuses == Counter({200: 1, 412: RACERS - 1}), statuses
    assert Tenant.objects.get(pk=tenant.pk).generation == tenant.generation + 1


def test_one_of_many_parallel_cluster_patches_with_one_if_match_wins():
    admin = factories.user("root", roles={"platform-admin"})
    placement_actions.create_cluster("west", region="eu-west")
    client = APIClient()
    client.force_authenticate(admin)
    etag = client.get("/api/v1/clusters/west/")["ETag"]
    statuses = race(admin, "/api/v1/clusters/west/", etag, lambda i: {"region_name": f"West {i}"})
    assert statuses == Counter({200: 1, 412: RACERS - 1}), statuses


def test_one_of_many_parallel_member_patches_with_one_if_match_wins():
    owner, bob = factories.user("olga"), factories.user("bob")
    tenant = factories.tenant("vision", owner=owner, members={"member": bob})
    membership = Membership.objects.get(tenant=tenant, user=bob)
    client = APIClient()
    client.force_authenticate(owner)
    etag = client.get(f"/api/v1/members/{membership.pk}/")["ETag"]
    statuses = race(owner, f"/api/v1/members/{membership.pk}/", etag,
                    lambda i: {"role": "admin" if i % 2 else "viewer"})
    assert statuses == Counter({200: 1, 412: RACERS - 1}), statuses


def test_one_of_many_parallel_quota_patches_with_one_if_match_wins():
    admin = factories.user("root", roles={"platform-admin"})
    model = sched.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920)
    sched.create_flavor("a100", gpu_model=model.name, mode="whole", capacity=64)
    quota = sched.set_quota(factories.tenant("vision"), flavor="a100", nominal=1, borrowing_limit=3)
    client = APIClient()
    client.force_authenticate(admin)
    etag = client.get(f"/api/v1/quotas/{quota.pk}/")["ETag"]
    statuses = race(admin, f"/api/v1/quotas/{quota.pk}/", etag, lambda i: {"nominal": i + 2})
    assert statuses == Counter({200: 1, 412: RACERS - 1}), statuses
    quota.refresh_from_db()
    assert quota.borrowing_limit == 3
