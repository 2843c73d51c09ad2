"""Idle findings and utilisation measured in a real VictoriaMetrics, exact to the second, through the CLI
contract and the scoped REST API. The trace carries billing's scrape pitfalls: a missed scrape inside an
idle run (bridged), HA replica copies, dcgm-exporter's old label names, a MIG instance (no GPU_UTIL), an
exporter without profiling metrics (GPU_UTIL fallback) and a HAMi share on a shared GPU."""

from __future__ import annotations

import html
import io
import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from billing import actions as billing_actions
from scheduling.fleetops.models import FleetSettings, IdleNotice, TenantIdleSettings
from scheduling.models import Flavor, GpuModel
from tests.support import factories
from tests.support.activity_series import Activity, device_lines, gpu_activity_lines
from tests.support.dcgm_series import IDLE_EMPTY, Gpu, HamiGpu, HamiShare, Hold, Timeline, gpu_lines, hami_lines

pytestmark = pytest.mark.django_db

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe"
# 08:00-12:00 UTC three days ago: the whole trace falls in one calendar month-to-date window (pages).
T0 = (datetime.now(UTC) - timedelta(days=3)).replace(hour=8, minute=0, second=0, microsecond=0)


def m(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def trace() -> list[str]:
    tl = Timeline(start=T0, end=m(240), interval=30, phase=7)
    # tenant acme (its series also carry a `cluster` label): busy 30 min, idle 90 min (memory 1000 then
    # 2000 MiB; scrape 150 missed: bridged), then
    # low engine activity but busy DRAM (memory-bound: not idle). Two HA replicas of every series.
    train = Gpu("GPU-1", H100, holds=(Hold("tenant-acme", "train-1", m(0), m(180), missed=frozenset({150})),),
                replicas=({"instance": "a:9400", "job": "dcgm", "cluster": "eu-1"},
                          {"instance": "b:9400", "job": "dcgm", "cluster": "eu-1", "prometheus_replica": "r2"}))
    train_act = (Activity(m(0), m(30), engine=0.8, dram=0.5),
                 Activity(m(30), m(100), engine=0.01, dram=0.01, fb_mib=1000),
                 Activity(m(100), m(120), engine=0.01, dram=0.01, fb_mib=2000),
                 Activity(m(120), m(180), engine=0.02, dram=0.6))
    # tenant a: a MIG instance idle from 60 min to the window's end (ongoing).
    mig = Gpu("GPU-3", A100, index=2, mig_profile="3g.40gb", mig_id="1",
              holds=(Hold("tenant-acme", "mig-1", m(60), m(240)),))
    mig_act = (Activity(m(60), m(240), engine=0.0, dram=0.0),)
    # tenant b: an exporter with old label names and no profiling metrics: GPU_UTIL 2 % all along.
    old = Gpu("GPU-2", H100, index=1, holds=(Hold("tenant-bravo", "old-1", m(0), m(240)),), old_label_names=True)
    old_act = (Activity(m(0), m(240), engine=None, dram=None, util=2),)
    # tenant b: a HAMi quarter share on a GPU whose device-level activity is 0 for its first 2 hours.
    shared = HamiGpu("GPU-H", f"NVIDIA-{A100}", 80 * 1024**3,
                     shares=(HamiShare("tenant-bravo", "share-1", m(0), m(120), 20 * 1024**3, 25),))
    # An unattributed GPU (empty pod labels, dcgm-exporter 3.x) idling all along: never a finding.
    spare = Gpu("GPU-4", H100, index=3, idle=IDLE_EMPTY)
    spare_activity = device_lines(tl, HamiGpu("GPU-4", "", 0, node="gpu-node-a", index=3), H100,
                                  (Activity(m(0), m(240), engine=0.0, dram=0.0),))
    return [*gpu_lines(tl, spare), *(line for line in spare_activity if "FB_USED" not in line),
            *gpu_activity_lines(tl, train, train_act), *gpu_activity_lines(tl, mig, mig_act),
            *gpu_activity_lines(tl, old, old_act), *hami_lines(tl, shared),
            *device_lines(tl, shared, A100, (Activity(m(0), m(240), engine=0.0, dram=0.0),))]


@pytest.fixture
def fleet(metrics):  # type: ignore[no-untyped-def]
    h100 = GpuModel.objects.create(name="h100", dcgm_model_name=H100, memory_mib=81559)
    a100 = GpuModel.objects.create(name="a100", dcgm_model_name=A100, memory_mib=81920)
    Flavor.objects.create(name="h100", gpu_model=h100, mode="whole", weight=1, capacity=8)
    Flavor.objects.create(name="a100-3g", gpu_model=a100, mode="mig", mig_profile="3g.40gb",
                          weight=Decimal("0.4286"), capacity=4)
    Flavor.objects.create(name="a100-share", gpu_model=a100, mode="hami", memory_percent=25, cores_percent=25,
                          weight=Decimal("0.25"), capacity=8)
    for flavor, price in (("h100", "2.40"), ("a100-3g", "0.90"), ("a100-share", "0.60")):
        billing_actions.set_price(flavor, price, "USD", (T0 - timedelta(days=30)).date().isoformat())
    alice, bob = factories.user("alice"), factories.user("bob")
    factories.tenant("acme", owner=alice, members={"owner": alice})
    factories.tenant("bravo", owner=bob, members={"owner": bob})
    metrics.import_prometheus(trace())
    return {"alice": alice, "bob": bob}


def run(*args: str) -> object:
    out = io.StringIO()
    call_command("fleet", *args, stdout=out)
    return json.loads(out.getvalue())


def by_pod(rows: list[dict]) -> dict[str, dict]:
    return {row["pod"]: row for row in rows}


def test_idle_findings_are_exact_to_the_second(fleet) -> None:  # type: ignore[no-untyped-def]
    rows = run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--json")
    found = by_pod(rows)  # type: ignore[arg-type]
    assert set(found) == {"train-1", "mig-1", "old-1", "share-1"}
    train = found["train-1"]
    # 10:30-12:00 idle across a missed scrape; the memory-bound hour after it is not idle.
    assert (train["start"], train["end"], train["idle_seconds"]) == (m(30).isoformat(), m(120).isoformat(), 5400)
    assert train["memory_mib"] == 2000 and train["signal"] == "profiling"
    assert train["cost"] == "3.60" or Decimal(str(train["cost"])) == Decimal("3.60")  # 1.5 h x 2.40
    assert train["currency"] == "USD" and train["gpu_equivalent_seconds"] == 5400
    mig = found["mig-1"]
    assert (mig["start"], mig["end"], mig["idle_seconds"]) == (m(60).isoformat(), None, 10800)
    assert mig["signal"] == "profiling" and Decimal(str(mig["gpu_equivalent_seconds"])) == Decimal("4628.88")
    old = found["old-1"]
    assert (old["namespace"], old["signal"], old["idle_seconds"]) == ("tenant-bravo", "gpu_util", 14400)
    share = found["share-1"]
    assert (share["flavor"], share["idle_seconds"], share["memory_mib"]) == ("a100-share", 7200, 20480)
    assert Decimal(str(share["gpu_equivalent_seconds"])) == Decimal("1800")  # a quarter of the GPU
    for row in rows:  # type: ignore[union-attr]
        assert set(row) >= {"tenant", "namespace", "pod", "flavor", "start", "end", "idle_seconds",
                            "gpu_equivalent_seconds", "memory_mib", "cost", "currency", "signal"}


def test_minimum_idle_run_is_configurable_per_call_fleet_and_tenant(fleet) -> None:  # type: ignore[no-untyped-def]
    window = ("--start", iso(m(0)), "--end", iso(m(240)), "--json")
    assert {r["pod"] for r in run("idle", *window, "--min-idle", "150")} == {"mig-1", "old-1"}  # type: ignore[union-attr]
    settings = FleetSettings.current()
    settings.min_idle_minutes = 200
    settings.save()
    assert {r["pod"] for r in run("idle", *window)} == {"old-1"}  # type: ignore[union-attr]
    TenantIdleSettings.objects.create(tenant_id=factories.Tenant.objects.get(slug="acme").pk, min_idle_minutes=60)
    assert {r["pod"] for r in run("idle", *window)} == {"old-1", "train-1", "mig-1"}  # type: ignore[union-attr]


def test_tenant_thresholds_change_what_is_idle(fleet) -> None:  # type: ignore[no-untyped-def]
    # Tenant b counts below 1 % as idle: the 2 % GPU_UTIL job is no longer idle; tenant a is unaffected.
    TenantIdleSettings.objects.create(tenant_id=factories.Tenant.objects.get(slug="bravo").pk,
                                      gpu_util_threshold=Decimal("0.01"))
    rows = run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--json")
    assert {r["pod"] for r in rows} == {"train-1", "mig-1", "share-1"}  # type: ignore[union-attr]
    only_b = run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--tenant", "bravo", "--json")
    assert {r["pod"] for r in only_b} == {"share-1"}  # type: ignore[union-attr]


def test_utilisation_allocated_as_billing_active_by_activity(fleet) -> None:  # type: ignore[no-untyped-def]
    rows = run("utilisation", "--start", iso(m(0)), "--end", iso(m(240)), "--json")
    table = {(r["tenant"], r["flavor"]): r for r in rows}  # type: ignore[union-attr]
    train = table[("acme", "h100")]
    assert Decimal(str(train["allocated_seconds"])) == 10800
    # 30 min at 0.8, 90 min at 0.01, 60 min at 0.02 (the missed scrape carries the value before it).
    assert Decimal(str(train["active_seconds"])) == Decimal(1800 * 0.8 + 5400 * 0.01 + 3600 * 0.02).quantize(
        Decimal("0.001"))
    assert Decimal(str(table[("bravo", "h100")]["active_seconds"])) == Decimal("288")  # 4 h at GPU_UTIL 2 %
    assert Decimal(str(table[("bravo", "h100")]["efficiency"])) == Decimal("0.02")
    assert Decimal(str(table[("bravo", "a100-share")]["allocated_seconds"])) == 1800  # 2 h x 0.25
    assert Decimal(str(table[("acme", "a100-3g")]["active_seconds"])) == 0


def test_tenant_api_is_scoped(fleet) -> None:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(fleet["alice"])
    params = {"start": iso(m(0)), "end": iso(m(240))}
    mine = client.get("/api/v1/fleet/idle/", params)
    assert mine.status_code == 200
    assert {r["tenant"] for r in mine.json()} == {"acme"}
    assert client.get("/api/v1/fleet/idle/", {**params, "tenant": "bravo"}).status_code == 404
    assert client.get("/api/v1/fleet/utilisation/", {**params, "tenant": "bravo"}).status_code == 404
    assert {r["tenant"] for r in client.get("/api/v1/fleet/utilisation/", params).json()} == {"acme"}
    bad = client.get("/api/v1/fleet/idle/", {"start": "yesterday", "end": iso(m(240))})
    assert bad.status_code == 400 and [e["field"] for e in bad.json()["errors"]] == ["start"]


def test_notice_reaches_owners_only(fleet, settings) -> None:  # type: ignore[no-untyped-def]
    admin = factories.user("root", roles={"platform-admin"})
    client = APIClient()
    client.force_authenticate(admin)
    finding = by_pod(run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--tenant", "bravo", "--json"))["old-1"]  # type: ignore[arg-type]
    created = client.post("/api/v1/fleet/notices/", {"tenant": "bravo", "finding": finding}, format="json")
    assert created.status_code == 201, created.content
    assert IdleNotice.objects.filter(tenant__slug="bravo").count() == 1
    wrong = client.post("/api/v1/fleet/notices/", {"tenant": "acme", "finding": finding}, format="json")
    assert wrong.status_code == 400  # the finding is tenant b's
    alice = APIClient()
    alice.force_authenticate(fleet["alice"])
    assert alice.get("/api/v1/fleet/notices/").json() == []
    denied = alice.post("/api/v1/fleet/notices/", {"tenant": "acme", "finding": finding}, format="json")
    assert denied.status_code == 403


def test_pages_scoped_and_show_findings(fleet, client) -> None:  # type: ignore[no-untyped-def]
    window = {"start": iso(m(0)), "end": iso(m(240))}
    client.force_login(fleet["alice"])
    assert client.get("/fleet/", window).status_code == 403
    assert client.get("/fleet/tenants/bravo/", window).status_code == 404
    page = client.get("/fleet/tenants/acme/", window)
    assert page.status_code == 200
    assert b"train-1" in page.content and b"old-1" not in page.content
    link = re.search(r'href="(/fleet/numbers/idle\.csv\?[^"]+)"', page.content.decode())
    assert link is not None
    numbers = client.get(html.unescape(link.group(1)))
    assert numbers.status_code == 200 and b"train-1" in numbers.content and b"old-1" not in numbers.content
    assert client.get("/fleet/numbers/idle.csv", {**window, "tenant": "bravo"}).status_code == 404
    assert b"old-1" not in client.get("/fleet/numbers/idle.csv", window).content
    admin = factories.user("root", roles={"platform-admin"})
    client.force_login(admin)
    fleet_page = client.get("/fleet/", window)
    assert fleet_page.status_code == 200
    assert b"old-1" in fleet_page.content and b"train-1" in fleet_page.content


def test_scale_to_zero_moves_the_endpoint_audited(fleet) -> None:  # type: ignore[no-untyped-def]
    from gpufleet.audit.models import AuditEvent
    from scheduling import actions as scheduling_actions
    from scheduling.models import SlaTier

    tenant = factories.Tenant.objects.get(slug="acme")
    factories.Tenant.objects.filter(pk=tenant.pk).update(phase="ready")
    scheduling_actions.defaults.ensure_rows()
    warm = SlaTier.objects.filter(min_replicas__gt=0).first()
    cold = SlaTier.objects.filter(min_replicas=0).first()
    assert warm is not None and cold is not None
    endpoint = scheduling_actions.create_endpoint(tenant, "chat", model="llama-3-8b", tier=warm.name)
    bob, alice = APIClient(), APIClient()
    bob.force_authenticate(fleet["bob"])
    alice.force_authenticate(fleet["alice"])
    url = f"/api/v1/fleet/endpoints/{endpoint.pk}/scale-to-zero/"
    assert bob.post(url, {"tier": cold.name}, format="json").status_code == 404  # not bob's tenant
    refused = alice.post(url, {"tier": warm.name}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "tier"
    done = alice.post(url, {"tier": cold.name}, format="json")
    assert done.status_code == 200 and done.json()["tier"] == cold.name
    endpoint.refresh_from_db()
    assert endpoint.tier == cold
    event = AuditEvent.objects.get(action="endpoint.scale_to_zero")
    assert event.before["tier"] == warm.name and event.after["tier"] == cold.name


def test_webhook_gets_the_notice(fleet) -> None:  # type: ignore[no-untyped-def]
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from scheduling.fleetops import actions, tasks
    from tests.support.services import free_port

    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fleet_settings = FleetSettings.current()
        fleet_settings.webhook_url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        fleet_settings.save()
        finding = by_pod(run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--tenant", "acme",
                             "--json"))["train-1"]  # type: ignore[arg-type]
        notice = actions.notify_owners(factories.Tenant.objects.get(slug="acme"), finding)
        assert tasks.send_idle_webhook(notice.pk) is True
    finally:
        server.shutdown()
        server.server_close()
    assert received[-1]["tenant"] == "acme" and received[-1]["finding"]["pod"] == "train-1"
    assert received[-1]["id"] == notice.pk


def test_bad_windows_are_refused_before_any_query(fleet) -> None:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.force_authenticate(fleet["alice"])
    too_long = client.get("/api/v1/fleet/idle/", {"start": "2026-01-01T00:00:00Z", "end": "2026-06-01T00:00:00Z"})
    assert too_long.status_code == 400 and too_long.json()["errors"][0]["field"] == "end"
    ancient = client.get("/api/v1/fleet/utilisation/", {"start": "0935-04-21T00:00:00Z", "end": "0935-04-22T00:00:00Z"})
    assert ancient.status_code == 400 and ancient.json()["errors"][0]["field"] == "start"
    with pytest.raises(CommandError, match="--end"):
        run("idle", "--start", iso(m(0)), "--end", iso(m(0)))
    with pytest.raises(CommandError, match="--min-idle"):
        run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--min-idle", "0")


def test_a_long_window_is_measured_in_chunks_with_the_same_runs(fleet) -> None:  # type: ignore[no-untyped-def]
    # 40 days of 30 s slots need several range queries (VictoriaMetrics caps points per series); runs that
    # are whole inside the window come out the same, to the second.
    short = by_pod(run("idle", "--start", iso(m(0)), "--end", iso(m(240)), "--json"))  # type: ignore[arg-type]
    long = by_pod(run("idle", "--start", iso(m(0) - timedelta(days=30)), "--end", iso(m(0) + timedelta(days=10)),
                      "--json"))  # type: ignore[arg-type]
    assert long["train-1"] == short["train-1"]
    assert long["mig-1"]["idle_seconds"] == 10800 and long["mig-1"]["end"] == m(240).isoformat()


def test_rollups_by_backfill_and_task_give_the_same_numbers(fleet, settings) -> None:  # type: ignore[no-untyped-def]
    """The CLI backfill and the hourly task record roll-ups; the same commands then read them (HAMi shares
    still raw) and print exactly what they printed from raw samples. The task is idempotent."""
    from infra.metrics import MetricsClient
    from scheduling.fleetops import rollup, service, tasks
    from tests.support.clock import pinned

    window = ("--start", iso(m(0)), "--end", iso(m(240)), "--json")
    before = [run("idle", *window), run("idle", *window, "--tenant", "bravo"), run("utilisation", *window)]
    assert any(row["pod"] == "share-1" for row in before[1])  # the HAMi share is among them
    # The task: hours settled by its pinned "now" (the last one is not, yet), then nothing new to do.
    settings.GPUFLEET_FLEETOPS_ROLLUP_HOURS = 24 * 7
    with pinned(m(240) + timedelta(minutes=10)):  # the last hour settles 20 min after its end
        first = tasks.rollup_recent.apply().get()
    assert first == {"util": 24 * 7, "idle": 24 * 7}  # every hour of the horizon (empty ones cost nothing)
    client = MetricsClient(settings.GPUFLEET_METRICS_URL)
    fingerprint = rollup.idle_fingerprint(service.options(), service.threshold_groups(FleetSettings.current())[0])
    cov = rollup.coverage(client, rollup.IDLE, fingerprint, m(0), m(240))
    assert sorted(cov) == [m(0), m(60), m(120)]  # the hour ending at m(240) had not settled
    # ... and the hours it rolled up are final (each computed >= the late allowance after its end): each
    # hour has one rev, so every rev stands for all its hours (utilisation totals sum them in one batch).
    assert rollup.final_hours(cov, service.late_allowance()) == cov
    with pinned(m(240) + timedelta(hours=3)):
        second = tasks.rollup_recent.apply().get()
        assert second["idle"] >= 1  # the hour not settled before, and the new ones
        assert tasks.rollup_recent.apply().get() == {"util": 0, "idle": 0}  # all final: nothing to redo
    after = [run("idle", *window), run("idle", *window, "--tenant", "bravo"), run("utilisation", *window)]
    assert after == before
    # The backfill command: everything is final already; --force recomputes, same numbers again.
    assert run("rollup", "--start", iso(m(0)), "--end", iso(m(240)), "--json") == {"util": 0, "idle": 0}
    assert run("rollup", "--start", iso(m(0)), "--end", iso(m(240)), "--force", "--json") == {"util": 4, "idle": 4}
    assert [run("idle", *window), run("idle", *window, "--tenant", "bravo"), run("utilisation", *window)] == before
    with pytest.raises(CommandError, match="--start"):
        run("rollup", "--start", iso(m(0) + timedelta(minutes=5)), "--end", iso(m(240)))


def test_the_hourly_task_rolls_up_only_hours_it_can_roll_up_final(fleet, settings) -> None:  # type: ignore[no-untyped-def]
    """30 min after m(240) the hour ending then has settled, but a roll-up now would not be final (reports
    would not read it, and its rev would stand superseded once the hour is redone): the task leaves it."""
    from infra.metrics import MetricsClient
    from scheduling.fleetops import rollup, service, tasks
    from tests.support.clock import pinned

    settings.GPUFLEET_FLEETOPS_ROLLUP_HOURS = 6
    with pinned(m(240) + timedelta(minutes=30)):
        tasks.rollup_recent.apply().get()
    client = MetricsClient(settings.GPUFLEET_METRICS_URL)
    for kind, fingerprint in ((rollup.UTIL, rollup.util_fingerprint(service.options(),
                                                                     service.billing_collect.flavor_specs())),
                              (rollup.IDLE, rollup.idle_fingerprint(service.options(), service.threshold_groups(
                                  FleetSettings.current())[0]))):
        cov = rollup.coverage(client, kind, fingerprint, m(0), m(300))
        assert sorted(cov) == [m(0), m(60), m(120)], kind
        assert rollup.final_hours(cov, service.late_allowance()) == cov


def test_beat_rolls_up_hourly() -> None:
    from gpufleet.celery import app

    # What a worker does at start: import every app's tasks module (autodiscovery is lazy), so the test
    # does not depend on another test having imported scheduling.fleetops.tasks first.
    app.loader.import_default_modules()
    app.finalize()
    schedule = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    hourly = schedule["scheduling.fleetops.tasks.rollup_recent"]
    assert hourly.minute == {25} and len(hourly.hour) == 24
    assert "scheduling.fleetops.tasks.rollup_recent" in app.tasks
