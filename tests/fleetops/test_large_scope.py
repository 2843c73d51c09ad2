"""Fleet idle and utilisation for callers who can see thousands of tenants (issue 27 item 8), against a real
VictoriaMetrics with its default `-search.maxQueryLen` (16 KiB).

A query that listed every visible tenant namespace grew with the scope (56 KB at ~185 tenants) and was refused
by the TSDB; the 503 then echoed the whole query. Queries must stay bounded at any number of tenants, and an
error body names no internals (query text, hosts, exception text)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from scheduling.fleetops.models import TenantIdleSettings
from scheduling.models import Flavor, GpuModel
from tenants.models import Membership, Tenant
from tests.support import factories
from tests.support.activity_series import Activity, gpu_activity_lines
from tests.support.dcgm_series import Gpu, Hold, Timeline
from tests.support.services import free_port
from tests.support.victoriametrics import VictoriaMetrics

pytestmark = pytest.mark.django_db

H100 = "NVIDIA H100 80GB HBM3"
T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)  # a fixed past morning: nothing depends on today
FILLERS = 9_999  # with acme: 10,000 tenants


def m(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


WINDOW = {"start": iso(m(0)), "end": iso(m(180))}


def trace() -> list[str]:
    """acme's H100 idle for two hours (a finding), busy for the third."""
    tl = Timeline(start=T0, end=m(180), interval=30, phase=7)
    gpu = Gpu("GPU-1", H100, holds=(Hold("tenant-acme", "train-1", m(0), m(180)),))
    return list(gpu_activity_lines(tl, gpu, (Activity(m(0), m(120), engine=0.0, dram=0.0),
                                             Activity(m(120), m(180), engine=0.9, dram=0.5))))


@pytest.fixture
def crowd(metrics):  # type: ignore[no-untyped-def]
    """10,000 tenants; carol is a member of all of them, the fillers have thresholds of their own (a threshold
    group naming 9,999 namespaces, and a fleet-default group excluding them)."""
    model = GpuModel.objects.create(name="h100", dcgm_model_name=H100, memory_mib=81559)
    Flavor.objects.create(name="h100", gpu_model=model, mode="whole", weight=1, capacity=8)
    carol = factories.user("carol")
    acme = factories.tenant("acme", owner=carol, members={"owner": carol})
    fillers = Tenant.objects.bulk_create(
        Tenant(slug=f"team-{i:05d}-with-a-longer-name", display_name=f"team {i}", trust_level="standard",
               phase="ready") for i in range(FILLERS))
    Membership.objects.bulk_create(Membership(tenant=t, user=carol, role="viewer") for t in fillers)
    TenantIdleSettings.objects.bulk_create(TenantIdleSettings(tenant=t, engine_threshold=Decimal("0.10"))
                                           for t in fillers)
    assert Tenant.objects.for_user(carol).count() == FILLERS + 1
    metrics.import_prometheus(trace())
    return {"carol": carol, "acme": acme}


def as_user(user) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_idle_and_utilisation_answer_for_ten_thousand_visible_tenants(crowd) -> None:  # type: ignore[no-untyped-def]
    billing = factories.user("bill", roles={"billing-admin"})
    admin = factories.user("root", roles={"platform-admin"})
    for who in (crowd["carol"], billing, admin):
        idle = as_user(who).get("/api/v1/fleet/idle/", WINDOW)
        assert idle.status_code == 200, (who.username, idle.content[:300])
        assert [(r["tenant"], r["pod"], r["idle_seconds"]) for r in idle.json()] == [("acme", "train-1", 7200)]
        util = as_user(who).get("/api/v1/fleet/utilisation/", {"start": iso(m(0)), "end": iso(m(180))})
        assert util.status_code == 200, (who.username, util.content[:300])
        assert [(r["tenant"], r["flavor"], Decimal(r["allocated_seconds"])) for r in util.json()] == [
            ("acme", "h100", 10800)]


def test_a_metrics_error_body_names_no_internals(crowd, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    """The TSDB refusing every query (a tiny -search.maxQueryLen: its error quotes the query) and the TSDB not
    answering at all: a 503 problem with a fixed sentence, nothing of the query, the host or the exception."""
    strict = VictoriaMetrics.start(tmp_path / "vm", extra_args=["-search.maxQueryLen=64"])
    closed = f"http://127.0.0.1:{free_port()}"
    try:
        for url in (strict.url, closed):
            settings.GPUFLEET_METRICS_URL = url
            for path in ("/api/v1/fleet/idle/", "/api/v1/fleet/utilisation/"):
                answer = as_user(crowd["carol"]).get(path, {**WINDOW, "tenant": "acme"})
                assert answer.status_code == 503, answer.content[:300]
                assert answer["Content-Type"] == "application/problem+json"
                body = answer.content.decode()
                assert answer.json()["detail"] == "the metrics server could not be queried; try again later"
                for internal in ("127.0.0.1", url.rsplit(":", 1)[1], "DCGM", "tenant-acme", "maxQueryLen",
                                 "Error", "http"):
                    assert internal not in body, (internal, body[:300])
    finally:
        strict.stop()


def test_queries_do_not_grow_with_the_selection() -> None:
    """Every query text of a selection of 10,000 namespaces (named or excluded) is as long as that of two
    short ones: within -search.maxQueryLen (16 KiB by default) at any scale."""
    from billing.metering.promql import QuerySettings
    from scheduling.fleetops.promql import ActivityQueries, Thresholds

    many = tuple(f"tenant-team-{i:05d}-with-a-longer-name" for i in range(10_000))
    few = many[:2]
    th = Thresholds(engine=Decimal("0.1"))
    settings = QuerySettings(scrape_interval=30, max_gap_scrapes=2, usage_metric="DCGM_FI_DEV_FB_USED")
    for kwargs in ({"namespaces": many}, {"exclude": many}):
        big = ActivityQueries(settings, th, **kwargs)  # type: ignore[arg-type]
        for text in (big.slot_masks(), big.idle_masks(), big.idle_masks(hami=True)):
            assert len(text) < 16 * 1024
            assert "team-00042" not in text
        assert big.selects(many[42]) is ("namespaces" in kwargs)
        assert big.selects("tenant-other") is ("exclude" in kwargs)
    small = ActivityQueries(settings, th, namespaces=few)
    assert few[0] in small.slot_masks() and small.selects(few[1]) and not small.selects(many[3])


def test_billing_admins_see_every_tenants_findings_and_notices_as_documented(crowd) -> None:  # type: ignore[no-untyped-def]
    """docs/api.md: platform and billing admins see every tenant's idle findings, utilisation and notices;
    members their tenants'. Billing admins saw the findings but only their own tenants' notices."""
    from scheduling.fleetops.models import IdleNotice

    other = Tenant.objects.get(slug="team-00007-with-a-longer-name")
    IdleNotice.objects.create(tenant=other, finding={}, message="idle", created=m(200))
    billing, dave = factories.user("bill", roles={"billing-admin"}), factories.user("dave")
    assert [n["tenant"] for n in as_user(billing).get("/api/v1/fleet/notices/").json()] == [other.slug]
    assert as_user(dave).get("/api/v1/fleet/notices/").json() == []
    assert as_user(dave).get("/api/v1/fleet/idle/", WINDOW).json() == []
    assert as_user(dave).get("/api/v1/fleet/idle/", {**WINDOW, "tenant": "acme"}).status_code == 404
    assert as_user(billing).post("/api/v1/fleet/notices/", {"tenant": other.slug, "finding": {}},
                                 format="json").status_code == 403  # sending stays a platform admin's
