"""Every list and detail route of the API and every portal page costs a number of SQL queries that does
not grow with the rows it shows: the same route is measured with 1 and with 6 rows of what it lists (and,
for a detail, of the object's children), and the count must be the same. The answer must show the added
rows, so a route that stopped listing them cannot pass by accident.

`test_every_route_is_covered` keeps the table complete: a new API route or portal page fails it until it is
measured here (or exempted, with the reason).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from itertools import count
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from billing.models import Invoice, InvoiceLine, Price, UsageRecord
from gpufleet import clock
from gpufleet.accounts.models import ApiToken
from scheduling import actions as sched
from scheduling.clusters.models import Cluster, ClusterFlavor, Placement, PlacementChangeRequest
from scheduling.clusters.sync_models import SyncRun
from scheduling.models import (
    Cohort,
    Flavor,
    GpuNodePool,
    InferenceEndpoint,
    Quota,
    QuotaChangeRequest,
    SlaTier,
    TenantScheduling,
)
from tenants.isolation.models import AllocationPolicy
from tenants.models import Membership, Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db
_seq = count()


class World:
    """A platform admin, an owner of every tenant, one GPU model, and rows added on demand."""

    def __init__(self) -> None:
        self.admin = factories.user("boss", roles={"platform-admin"})
        self.owner = factories.user("owner")
        self.model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
        self.flavor = self.flavors(1)[0]
        self.tenant = self.tenants(1)[0]
        self.tier = SlaTier.objects.first() or SlaTier.objects.create(name="standard", min_replicas=1)
        now = clock.now()
        self.month = (now.replace(day=1, hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)).replace(day=1)

    def flavors(self, n: int) -> list[Flavor]:
        return [sched.create_flavor(f"f{next(_seq)}", gpu_model=self.model.name, mode="whole", capacity=64)
                for _ in range(n)]

    def tenants(self, n: int) -> list[Tenant]:
        out = []
        for _ in range(n):
            tenant = factories.tenant(f"team-{next(_seq):04d}", "trusted", owner=self.owner, phase=Phase.READY)
            out.append(tenant)
        return out

    def requested(self, n: int) -> None:
        """Tenants waiting for approval."""
        for _ in range(n):
            factories.tenant(f"team-{next(_seq):04d}", "standard", owner=self.owner)

    def members(self, tenant: Tenant, n: int) -> None:
        for _ in range(n):
            Membership.objects.create(tenant=tenant, user=factories.user(f"m{next(_seq)}"), role="member")

    def quotas(self, n: int) -> None:
        Quota.objects.bulk_create([Quota(tenant=self.tenant, flavor=f, nominal=1) for f in self.flavors(n)])

    def requests(self, n: int) -> None:
        QuotaChangeRequest.objects.bulk_create([
            QuotaChangeRequest(tenant=self.tenant, flavor=self.flavor, nominal=1, proposed_by=self.owner)
            for _ in range(n)])

    def endpoints(self, n: int) -> None:
        InferenceEndpoint.objects.bulk_create([
            InferenceEndpoint(tenant=self.tenant, name=f"e{next(_seq)}", model="m", deployment="d", tier=self.tier)
            for _ in range(n)])

    def node_pools(self, n: int) -> None:
        GpuNodePool.objects.bulk_create([GpuNodePool(name=f"p{next(_seq)}", flavor=self.flavor, gpu_limit=8)
                                         for _ in range(n)])

    def cohorts(self, n: int) -> None:
        Cohort.objects.bulk_create([Cohort(name=f"c{next(_seq)}") for _ in range(n)])

    def scheduling(self, n: int) -> None:
        cohort = Cohort.objects.create(name=f"c{next(_seq)}")
        TenantScheduling.objects.bulk_create([TenantScheduling(tenant=t, cohort=cohort) for t in self.tenants(n)])

    def policies(self, n: int) -> None:
        existing = set(AllocationPolicy.objects.values_list("trust_level", flat=True))
        for level in [lv for lv in ("untrusted", "standard", "trusted") if lv not in existing][:n]:
            AllocationPolicy.objects.create(trust_level=level, allowed_modes=["whole"])

    def tokens(self, n: int, user: Any = None) -> None:
        for _ in range(n):
            _, prefix, digest = ApiToken.generate()
            ApiToken.objects.create(user=user or self.admin, name=f"k{next(_seq)}", prefix=prefix, digest=digest)

    def invoices(self, n: int, lines: int = 2) -> list[Invoice]:
        made = []
        for tenant in self.tenants(n):
            inv = Invoice.objects.create(tenant=tenant, period=self.month.date(), currency="EUR")
            self.lines(inv, lines)
            made.append(inv)
        return made

    def invoice(self) -> Invoice:
        return Invoice.objects.order_by("pk").first() or self.invoices(1, lines=0)[0]

    def lines(self, invoice: Invoice, n: int) -> None:
        start = invoice.lines.count()
        InvoiceLine.objects.bulk_create([
            InvoiceLine(invoice=invoice, position=start + i + 1, kind="usage", flavor=self.flavor,
                        flavor_name=self.flavor.name, description="GPU time", charge_start=self.month,
                        charge_end=self.month + timedelta(days=1), quantity=Decimal(1), unit_price=Decimal(2),
                        amount=Decimal(2), unit_seconds=Decimal(3600), gpu_equivalent_seconds=Decimal(3600))
            for i in range(n)])

    def prices(self, n: int) -> None:
        Price.objects.bulk_create([Price(flavor=f, currency="EUR", per_unit_hour=Decimal("2.5"),
                                         effective_from=self.month.date()) for f in self.flavors(n)])

    def usage(self, n: int) -> None:
        """n more flavors with a day of hourly usage each for the tenant."""
        now = clock.now()
        UsageRecord.objects.bulk_create([
            UsageRecord(tenant=self.tenant, flavor=f, hour=self.month + timedelta(hours=h), unit_seconds=Decimal(3600),
                        gpu_equivalent_seconds=Decimal(3600), collected_at=now, window_start=self.month,
                        window_end=self.month + timedelta(days=1))
            for f in self.flavors(n) for h in range(24)])

    def clusters(self, n: int) -> list[Any]:
        """n more host clusters, each offering the world's flavor."""
        made = []
        for _ in range(n):
            cluster = Cluster.objects.create(name=f"c-{next(_seq)}", purpose="training", region="eu-west-1")
            ClusterFlavor.objects.create(cluster=cluster, flavor=self.flavor, capacity=8)
            made.append(cluster)
        return made

    def placements(self, n: int) -> None:
        """The world's tenant placed on n more clusters (beside its home)."""
        Placement.objects.bulk_create([Placement(tenant=self.tenant, cluster=c) for c in self.clusters(n)])

    def placement_requests(self, n: int) -> None:
        PlacementChangeRequest.objects.bulk_create([
            PlacementChangeRequest(tenant=self.tenant, cluster=c, action="add", reason="more GPUs",
                                   proposed_by=self.owner) for c in self.clusters(n)])

    def sync_runs(self, n: int) -> None:
        now = clock.now()
        SyncRun.objects.bulk_create([SyncRun(started=now - timedelta(minutes=i), finished=now, state="ok")
                                     for i in range(n)])


@dataclass(frozen=True)
class Case:
    url: Callable[[World], str]
    grow: Callable[[World, int], Any]  # adds n rows of what the route shows
    caller: str = "admin"  # "admin" or "owner"
    portal: bool = False
    grows: bool = True  # False: a detail of an object whose answer does not include the added rows


def _first(model: Any) -> Callable[[World], Any]:
    return lambda w: model.objects.order_by("pk").first().pk


API = "/api/v1/"
CASES: dict[str, Case] = {
    # --- API lists: more rows of the collection -----------------------------------------------------------
    "tenant-list": Case(lambda w: API + "tenants/", lambda w, n: w.tenants(n)),
    "tenant-list (member)": Case(lambda w: API + "tenants/", lambda w, n: w.tenants(n), "owner"),
    "member-list": Case(lambda w: API + "members/", lambda w, n: w.members(w.tenant, n)),
    "token-list": Case(lambda w: API + "tokens/", lambda w, n: w.tokens(n)),
    # One row per trust level at most (the migration creates them): it cannot grow.
    "gpu-allocation-policy-list": Case(lambda w: API + "gpu-allocation-policies/", lambda w, n: w.policies(n),
                                       grows=False),
    "flavor-list": Case(lambda w: API + "flavors/", lambda w, n: w.flavors(n)),
    "node-pool-list": Case(lambda w: API + "node-pools/", lambda w, n: w.node_pools(n)),
    "quota-list": Case(lambda w: API + "quotas/", lambda w, n: w.quotas(n)),
    "quota-list (member)": Case(lambda w: API + "quotas/", lambda w, n: w.quotas(n), "owner"),
    "quota-request-list": Case(lambda w: API + "quota-requests/", lambda w, n: w.requests(n)),
    "endpoint-list": Case(lambda w: API + "endpoints/", lambda w, n: w.endpoints(n)),
    "cohort-list": Case(lambda w: API + "cohorts/", lambda w, n: w.cohorts(n)),
    "tenant-scheduling-list": Case(lambda w: API + "tenant-scheduling/", lambda w, n: w.scheduling(n)),
    "billing-invoice-list": Case(lambda w: API + "billing/invoices/", lambda w, n: w.invoices(n)),
    "billing-invoice-list (owner)": Case(lambda w: API + "billing/invoices/", lambda w, n: w.invoices(n), "owner"),
    "billing-price-list": Case(lambda w: API + "billing/prices/", lambda w, n: w.prices(n)),
    "billing-usage": Case(lambda w: API + f"billing/usage/?tenant={w.tenant.slug}&period={w.month:%Y-%m}",
                          lambda w, n: w.usage(n), "owner"),
    "sync-status": Case(lambda w: API + "sync/", lambda w, n: w.sync_runs(n)),
    "cluster-list": Case(lambda w: API + "clusters/", lambda w, n: w.clusters(n)),
    "placement-list": Case(lambda w: API + "placements/", lambda w, n: w.placements(n)),
    "placement-list (member)": Case(lambda w: API + "placements/", lambda w, n: w.placements(n), "owner"),
    "placement-request-list": Case(lambda w: API + "placement-requests/", lambda w, n: w.placement_requests(n)),
    # --- API details: the first object, with more rows around it or below it --------------------------------
    "tenant-detail": Case(lambda w: API + f"tenants/{w.tenant.pk}/", lambda w, n: w.members(w.tenant, n)),
    "member-detail": Case(lambda w: API + f"members/{Membership.objects.order_by('pk').first().pk}/",
                          lambda w, n: w.members(w.tenant, n), grows=False),
    "token-detail": Case(lambda w: API + f"tokens/{ApiToken.objects.order_by('pk').first().pk}/",
                         lambda w, n: w.tokens(n), grows=False),
    "gpu-allocation-policy-detail": Case(
        lambda w: API + f"gpu-allocation-policies/{AllocationPolicy.objects.order_by('pk').first().trust_level}/",
        lambda w, n: w.policies(n), grows=False),
    "flavor-detail": Case(lambda w: API + f"flavors/{w.flavor.pk}/", lambda w, n: w.node_pools(n), grows=False),
    "node-pool-detail": Case(lambda w: API + f"node-pools/{GpuNodePool.objects.order_by('pk').first().pk}/",
                             lambda w, n: w.node_pools(n), grows=False),
    "quota-detail": Case(lambda w: API + f"quotas/{Quota.objects.order_by('pk').first().pk}/",
                         lambda w, n: w.quotas(n), grows=False),
    "quota-request-detail": Case(
        lambda w: API + f"quota-requests/{QuotaChangeRequest.objects.order_by('pk').first().pk}/",
        lambda w, n: w.requests(n), grows=False),
    "endpoint-detail": Case(lambda w: API + f"endpoints/{InferenceEndpoint.objects.order_by('pk').first().pk}/",
                            lambda w, n: w.endpoints(n), grows=False),
    "cohort-detail": Case(lambda w: API + f"cohorts/{Cohort.objects.order_by('pk').first().pk}/",
                          lambda w, n: w.cohorts(n), grows=False),
    "tenant-scheduling-detail": Case(
        lambda w: API + f"tenant-scheduling/{TenantScheduling.objects.order_by('pk').first().pk}/",
        lambda w, n: w.scheduling(n), grows=False),
    "billing-invoice-detail": Case(lambda w: API + f"billing/invoices/{Invoice.objects.order_by('pk').first().pk}/",
                                   lambda w, n: w.lines(w.invoice(), n)),
    "billing-price-detail": Case(lambda w: API + f"billing/prices/{Price.objects.order_by('pk').first().pk}/",
                                 lambda w, n: w.prices(n), grows=False),
    "cluster-detail": Case(lambda w: API + f"clusters/{Cluster.objects.order_by('pk').first().name}/",
                           lambda w, n: w.placements(n), grows=False),
    "placement-detail": Case(lambda w: API + f"placements/{Placement.objects.order_by('pk').first().pk}/",
                             lambda w, n: w.placements(n), grows=False),
    "placement-request-detail": Case(
        lambda w: API + f"placement-requests/{PlacementChangeRequest.objects.order_by('pk').first().pk}/",
        lambda w, n: w.placement_requests(n), grows=False),
    # --- portal pages ---------------------------------------------------------------------------------------
    "portal:home": Case(lambda w: "/", lambda w, n: w.tenants(n), "owner", True),
    # The fleet overview shows counts and per-flavor figures: more tenants change numbers, not its length.
    "portal:home (admin)": Case(lambda w: "/", lambda w, n: w.tenants(n), "admin", True, grows=False),
    "portal:tenant-list": Case(lambda w: "/tenants/", lambda w, n: w.tenants(n), "owner", True),
    "scheduling:clusters": Case(lambda w: "/gpu/clusters/", lambda w, n: w.clusters(n), "admin", True),
    "scheduling:cluster-detail": Case(lambda w: f"/gpu/clusters/{Cluster.objects.order_by('pk').first().name}/",
                                      lambda w, n: w.placements(n), "admin", True, grows=False),
    "scheduling:queue": Case(lambda w: "/gpu/queue/", lambda w, n: w.placements(n), "admin", True),
    "portal:tenant-detail": Case(lambda w: f"/tenants/{w.tenant.slug}/", lambda w, n: w.members(w.tenant, n),
                                 "owner", True),
    "portal:tenant-isolation": Case(lambda w: f"/tenants/{w.tenant.slug}/isolation/",
                                    lambda w, n: w.tenants(n), "owner", True, grows=False),
    "portal:approvals": Case(lambda w: "/approvals/", lambda w, n: w.requested(n), "admin", True),
    "portal:tokens": Case(lambda w: "/tokens/", lambda w, n: w.tokens(n, w.owner), "owner", True),
    "scheduling:flavors": Case(lambda w: "/gpu/flavors/", lambda w, n: w.flavors(n), "owner", True),
    "scheduling:tenant-gpu": Case(lambda w: f"/gpu/tenants/{w.tenant.slug}/",
                                  lambda w, n: (w.quotas(n), w.endpoints(n), w.requests(n)), "owner", True),
    "scheduling:requests": Case(lambda w: "/gpu/requests/", lambda w, n: w.requests(n), "admin", True),
    "scheduling:request-detail": Case(
        lambda w: f"/gpu/requests/{QuotaChangeRequest.objects.order_by('pk').first().pk}/",
        lambda w, n: w.requests(n), "admin", True, grows=False),
    "billing:usage": Case(lambda w: f"/billing/usage/{w.tenant.slug}/?period={w.month:%Y-%m}",
                          lambda w, n: w.usage(n), "owner", True),
    "billing:invoice-list": Case(lambda w: "/billing/invoices/", lambda w, n: w.invoices(n), "admin", True),
    # The admin forms list flavors and clusters in their selects: more flavors, same queries.
    "scheduling:quota-set": Case(lambda w: f"/gpu/tenants/{w.tenant.slug}/quota/", lambda w, n: w.flavors(n),
                                 "admin", True),
    "scheduling:node-pool-create": Case(lambda w: "/gpu/node-pools/new/", lambda w, n: w.flavors(n), "admin", True),
    "billing:price-list": Case(lambda w: "/billing/prices/", lambda w, n: w.prices(n), "owner", True),
    "billing:price-set": Case(lambda w: "/billing/prices/new/", lambda w, n: w.flavors(n), "admin", True),
    "billing:invoice-detail": Case(lambda w: f"/billing/invoices/{Invoice.objects.order_by('pk').first().pk}/",
                                   lambda w, n: w.lines(w.invoice(), n), "admin", True),
}

# Routes that list nothing from the database, only write, or call out: why each is not measured here.
EXEMPT = {
    "api-root": "lists route names, no rows",
    "schema": "the OpenAPI document, no rows",
    "billing-reconciliation": "a report computed from OpenCost (an external service), tests/billing",
    "billing-export": "a file download of a whole month, tests/billing",
    "portal:login": "a form, no rows", "portal:logout": "POST", "portal:tenant-request": "a form, no rows",
    "portal:tenant-rename": "POST", "portal:tenant-delete": "POST", "portal:tenant-approve": "POST",
    "portal:tenant-reject": "POST", "portal:tenant-suspend": "POST", "portal:tenant-resume": "POST",
    "portal:tenant-trust-level": "POST", "portal:token-revoke": "POST",
    "portal:tenant-dropped-flows": "asks Hubble (an external service), tests/isolation",
    "portal:tenant-kubeconfig": "one generated file for one tenant, no list",
    "scheduling:index": "a redirect", "scheduling:request-approve": "POST", "scheduling:request-reject": "POST",
    "scheduling:simulate": "a form; the run it starts is a task", "scheduling:simulation": "one simulation result",
    "scheduling:plan-autoscaling": "a form for one endpoint",
    "billing:index": "a redirect", "billing:invoice-download": "a file of one invoice",
    "billing:reconciliation": "OpenCost (an external service)",
    "billing:invoice-finalize": "POST", "billing:invoice-void": "POST", "billing:invoice-reissue": "POST",
    "billing:exports": "a file download",
    # Read from a live cluster's API and the TSDB (tests/nodehealth), not from rows of this database.
    "node-health-list": "the cluster's nodes and the TSDB (external), tests/nodehealth",
    "scheduling:node-health": "the cluster's nodes and the TSDB (external), tests/nodehealth",
    "scheduling:node-uncordon": "POST",
    "workload-list": "the tenant's Workloads from the cluster API (external), tests/nodehealth",
    "workload-detail": "one Workload from the cluster API (external), tests/nodehealth",
    "scheduling:tenant-workloads": "the tenant's Workloads from the cluster API (external), tests/nodehealth",
}


def _count(client: Any, url: str) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, secure=True)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return len(ctx.captured_queries), response


def _client(world: World, case: Case) -> Any:
    user = world.admin if case.caller == "admin" else world.owner
    if case.portal:
        client = Client()
        client.force_login(user)
        return client
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize("name", sorted(CASES))
def test_queries_do_not_grow_with_rows(name: str, settings) -> None:
    settings.SECURE_SSL_REDIRECT = False
    case = CASES[name]
    world = World()
    case.grow(world, 1)
    client = _client(world, case)
    url = case.url(world)
    _count(client, url)  # warm-up: first-use caches (content types, sessions) are not the route's cost
    few, small = _count(client, url)
    case.grow(world, 5)
    many, large = _count(client, url)
    assert many <= few, f"{name}: {few} queries with 1 row, {many} with 6"
    # The bigger answer shows the new rows (a route that stopped showing them would pass the count).
    if case.grows:
        assert len(large.content) > len(small.content), f"{name}: the answer did not grow with the rows"


def _names(resolver: Any, namespace: str = "") -> set[str]:
    names = set()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            names |= _names(entry, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            names.add(f"{namespace}{entry.name}")
    return names


def test_every_route_is_covered() -> None:
    """Every named API route (lists and details; actions are writes) and portal page is measured or exempt."""
    resolver = get_resolver()
    # Lists and details (the other routes of a viewset are write actions or files of one object).
    api = {n for n in _names(get_resolver("gpufleet.api.urls")) if n.endswith(("-list", "-detail"))}
    api |= {"billing-usage", "sync-status"}
    portal = {n for n in _names(resolver) if n.split(":")[0] in ("portal", "scheduling", "billing")}
    covered = {name.split(" (")[0] for name in CASES} | set(EXEMPT)
    missing = sorted((api | portal) - covered)
    assert not missing, f"routes without a query-count case here: {missing}"
