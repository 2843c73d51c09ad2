"""API benchmark: the production profile under the chart's own gunicorn command, 1,000 tenants, 16 clients.

One command: `.venv/bin/python benchmarks/api.py` (or `make bench`). It

1. renders helm/gpufleet (Helm's Go SDK, as tests/helm do) and takes the web container's command,
   arguments and ConfigMap environment: the server runs exactly as a pod runs it (gunicorn, the chart's
   workers/threads/timeout, access log on, JSON logs, PROMETHEUS_MULTIPROC_DIR); only the listen address
   (loopback, a free port) and the secrets are local. `--set web.workers=16` renders other values.
2. creates its own PostgreSQL database (`gpufleet_bench_api`; BENCH_DATABASE_URL overrides; dropped at
   the end), migrates it and seeds 1,000 tenants, each with 3 members, a quota on 4 flavors, usage rows
   and an invoice with 4 lines; one user is a member (owner) of 5 tenants and has a month of hourly
   usage on each; one user is a platform admin. Both call with API tokens, as automation does.
3. counts the SQL queries of every measured route in-process (Django test client, same settings):
   load-insensitive, and they must not grow with the page size.
4. drives 16 keep-alive connections at each route in turn for `--duration` seconds (loopback only)
   with `wrk` (C, epoll: it needs a few % of one core at these rates, so the server gets the machine);
   without wrk, a threaded `http.client` client (keep-alive, one connection per thread), which can be the
   bottleneck on 2 cores -- the output says which client ran.
5. prints req/s, p50/p99, the ratio to the floor (a minimal Django view through the same server and
   middleware: `/bench/floor`, benchmarks/apibench/urls.py), the server's CPU time per request (gunicorn
   master + workers, and the PostgreSQL backends when they are visible in /proc: insensitive to other
   load on the machine, unlike req/s) and the load average; exits 1 when a route misses its target.

Targets (issue 14): page of 50 >= 300 req/s with p99 <= 100 ms; `?limit=200` >= 120 req/s, p99 <= 250 ms.
Options: --duration S (per route, default 10), --clients N (16), --tenants N (1000), --set k=v (chart
values, repeatable), --only NAME (repeatable), --profile (cProfile of each route in-process, top 20),
--python-client (force the fallback client), --keep-db, --no-answer-cache (every read computed: the server runs
with GPUFLEET_API_CACHE_BYTES=0), --gc (cyclic garbage per request and the CPU of a full collector pass,
in-process; `--set config.extraEnv.GPUFLEET_GC_FREEZE=0` runs the server without gpufleet/gcfreeze.py).
BENCH_PROFILE_SORT / BENCH_PROFILE_TOP: the profile's order and length.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]
HERE = Path(__file__).resolve().parent / "apibench"

SETTINGS = "benchmarks.apibench.settings"  # gpufleet.settings.production + the floor route
HOST = "127.0.0.1"
FLAVORS = ("h100", "h100-3g", "h100-1g", "h100-quarter")
MEMBER_TENANTS = 5


@dataclass
class Route:
    name: str
    caller: str  # "admin" | "member" | "none"
    path: str
    rps: float | None = None  # targets; None: reported only (the floor)
    p99_ms: float | None = None
    queries: int | None = None
    cpu_inprocess: float = 0.0
    cpu_uncached: float = 0.0  # the same, with the answer cache off: what a miss costs
    writes_per_s: float = 0.0  # a tenant row written this often during the load run (cache invalidations)
    result: dict[str, Any] = field(default_factory=dict)


def routes(period: str, detail_id: int, member_slug: str) -> list[Route]:
    page = {"rps": 300.0, "p99_ms": 100.0}
    return [
        Route("floor (minimal Django view)", "none", "/bench/floor"),
        Route("tenant list, admin (50 of 1000)", "admin", "/api/v1/tenants/", **page),
        Route("tenant list, member of 5", "member", "/api/v1/tenants/", **page),
        Route("tenant list, admin ?limit=200", "admin", "/api/v1/tenants/?limit=200", rps=120.0, p99_ms=250.0),
        Route("tenant detail, member", "member", f"/api/v1/tenants/{detail_id}/", **page),
        Route("quota list, admin (50 of 4000)", "admin", "/api/v1/quotas/", **page),
        Route("usage for a month, member", "member",
              f"/api/v1/billing/usage/?tenant={member_slug}&period={period}", **page),
        Route("invoice list, admin (50 of 1000)", "admin", "/api/v1/billing/invoices/", **page),
        # Reported, no target: the admin page while a tenant is written 10 times a second (each write empties
        # every process's answer cache, so the first read after it per process is a miss).
        Route("tenant list, admin, 10 writes/s", "admin", "/api/v1/tenants/", writes_per_s=10.0),
    ]


# --- the chart -------------------------------------------------------------------------------------------

def _parse_sets(sets: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in sets:
        key, _, raw = item.partition("=")
        node = values
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = int(raw) if raw.isdigit() else raw
    return values


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def chart_web(sets: list[str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """(argv, ConfigMap environment, web values) of the chart's web container, rendered by Helm's Go SDK."""
    try:
        import helm_python
    except ImportError:
        sys.exit("benchmarks/api.py renders the chart with PyPI `helm-python-sdk` (make install installs it)")
    import yaml

    values = _merge({
        "image": {"repository": "registry.example.com/platform/gpufleet", "tag": "0.1.0"},
        "config": {"oidc": {"issuer": "https://login.example.invalid/realms/main", "clientId": "gpufleet"},
                   "allowedHosts": [HOST],
                   "extraEnv": {"GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.example.invalid"}},
    }, _parse_sets(sets))
    with helm_python.Chart.load(str(REPO / "helm" / "gpufleet")) as chart:
        out = chart.render(values, name="gpufleet", namespace="gpufleet", revision=1, is_install=True,
                           is_upgrade=False)
    objects = [doc for path, text in sorted(out.items()) if path.endswith(".yaml")
               for doc in yaml.safe_load_all(text) if doc]
    web = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "gpufleet-web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    config = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "gpufleet")["data"]
    merged_values = yaml.safe_load((REPO / "helm" / "gpufleet" / "values.yaml").read_text())["web"]
    _merge(merged_values, values.get("web", {}))
    return [*container["command"], *container.get("args", [])], dict(config), merged_values


def server_argv(chart_argv: list[str], port: int) -> list[str]:
    """The chart's command with the listen address swapped for loopback and the app for the bench
    settings' WSGI app (same application object; the settings module adds only the floor route)."""
    argv = []
    for arg in chart_argv:
        if arg.startswith("--bind="):
            arg = f"--bind={HOST}:{port}"
        argv.append(arg)
    venv_bin = Path(sys.executable).parent
    if not Path(argv[0]).is_absolute() and (venv_bin / argv[0]).exists():
        argv[0] = str(venv_bin / argv[0])
    return argv


def server_env(config: dict[str, str], database_url: str, tmp: Path) -> dict[str, str]:
    env = {k: str(v) for k, v in config.items()}
    env.update({
        # The Secret's keys (secrets.keys in values.yaml), local values.
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"),
        "OIDC_RP_CLIENT_SECRET": secrets.token_urlsafe(24),
        # The pod's volumes, here (as tests/helm/test_processes.py): the /tmp emptyDir and the var volume.
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "prom"),
        "GPUFLEET_VAR_DIR": str(tmp / "var"),
        "GPUFLEET_GITOPS_REPO": str(tmp / "var" / "gitops"),
        "HOME": str(tmp),
        "GPUFLEET_REFERENCE_DIR": os.environ.get("GPUFLEET_REFERENCE_DIR", str(REPO.parent / "shared" / "reference")),
        # The issuer is not reachable from here; name its endpoints so nothing is discovered at runtime
        # (no request below touches OIDC anyway).
        **{name: f"https://login.example.invalid/{name.lower()}" for name in (
            "OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT", "OIDC_OP_LOGOUT_ENDPOINT")},
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")]),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    })
    (tmp / "prom").mkdir(exist_ok=True)
    (tmp / "var").mkdir(exist_ok=True)
    return env


# --- the database ------------------------------------------------------------------------------------------

def _database_url() -> str:
    return os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpufleet_bench_api")


def _admin_conn(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True)


def _recreate_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with _admin_conn(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with _admin_conn(url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(n: int) -> dict[str, Any]:
    """n tenants, 3 members each, a quota on 4 flavors, usage and one invoice (4 lines) each. Setup data:
    written in bulk, not through the actions (which are not what is measured here)."""
    from django.contrib.auth.models import Group, User

    from billing.models import Invoice, InvoiceLine, UsageRecord
    from gpufleet import clock
    from gpufleet.accounts.models import ApiToken
    from gpufleet.accounts.roles import PLATFORM_ADMIN
    from scheduling import actions as sched
    from scheduling.models import Quota
    from tenants.models import Membership, Phase, Tenant

    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    flavors = [
        sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=4 * n),
        sched.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=4 * n),
        sched.create_flavor("h100-1g", gpu_model=model.name, mode="mig", mig_profile="1g.10gb", capacity=4 * n),
        sched.create_flavor("h100-quarter", gpu_model=model.name, mode="hami", memory_percent=25,
                            cores_percent=25, capacity=8 * n),
    ]
    now = clock.now()
    # What a reconciled tenant carries: its conditions and the 14 objects it applied.
    kinds = ["Namespace.core", "ResourceQuota.core", "LimitRange.core", "HelmRelease.helm.toolkit.fluxcd.io",
             "ClusterQueue.kueue.x-k8s.io", "LocalQueue.kueue.x-k8s.io", "Queue.scheduling.run.ai",
             "ClusterPolicy.kyverno.io", "CiliumNetworkPolicy.cilium.io", "NetworkPolicy.networking.k8s.io",
             "RoleBinding.rbac.authorization.k8s.io", "ServiceAccount.core", "Secret.core", "ConfigMap.core"]
    conditions = [{"type": t, "status": "True", "reason": "Reconciled", "message": f"{t} is up to date",
                   "lastTransitionTime": now.isoformat()} for t in ("Ready", "Synced", "Isolation", "Secrets")]
    tenants = Tenant.objects.bulk_create([
        Tenant(slug=f"team-{i:04d}", display_name=f"Team {i:04d}", trust_level="trusted", phase=Phase.READY,
               generation=2, observed_generation=2, conditions=conditions, last_reconciled_at=now,
               applied_objects=[f"{k}/tenant-team-{i:04d}/tenant-team-{i:04d}" for k in kinds])
        for i in range(n)
    ], batch_size=1000)
    users = User.objects.bulk_create([User(username=f"user-{i:04d}", password="!") for i in range(n)],
                                     batch_size=1000)
    admin = User.objects.create(username="bench-admin", password="!")
    admin.groups.add(Group.objects.get_or_create(name=PLATFORM_ADMIN)[0])
    member = User.objects.create(username="bench-member", password="!")
    roles = ("owner", "admin", "member")
    Membership.objects.bulk_create(
        [Membership(tenant=t, user=users[(i + k) % n], role=roles[k]) for i, t in enumerate(tenants) for k in range(3)]
        + [Membership(tenant=t, user=member, role="owner") for t in tenants[:MEMBER_TENANTS]],
        batch_size=2000)
    Quota.objects.bulk_create([Quota(tenant=t, flavor=f, nominal=2, borrowing_limit=1, lending_limit=0)
                               for t in tenants for f in flavors], batch_size=2000)
    # Usage of the previous month: hourly on two flavors for the member's tenants, daily on one for the rest.
    month = (now.replace(day=1, hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)).replace(day=1)
    days = ((month + timedelta(days=32)).replace(day=1) - month).days
    rows = []
    for i, t in enumerate(tenants):
        hours = range(days * 24) if i < MEMBER_TENANTS else range(12, days * 24, 24)
        for f in flavors[: 2 if i < MEMBER_TENANTS else 1]:
            for h in hours:
                at = month + timedelta(hours=h)
                rows.append(UsageRecord(tenant=t, flavor=f, hour=at, unit_seconds=Decimal("3600"),
                                        gpu_equivalent_seconds=Decimal("3600"), collected_at=now,
                                        window_start=at, window_end=at + timedelta(hours=1)))
    UsageRecord.objects.bulk_create(rows, batch_size=5000)
    invoices = Invoice.objects.bulk_create([
        Invoice(tenant=t, period=month.date(), currency="EUR", subtotal=Decimal("1234.56"),
                total=Decimal("1234.56"), content_hash="0" * 64, drafted_at=now) for t in tenants
    ], batch_size=1000)
    InvoiceLine.objects.bulk_create([
        InvoiceLine(invoice=inv, position=p, kind="usage", flavor=f, flavor_name=f.name,
                    description=f"{f.name} GPU time", charge_start=month, charge_end=month + timedelta(days=days),
                    quantity=Decimal("100.5"), unit_price=Decimal("3.07"), amount=Decimal("308.64"),
                    unit_seconds=Decimal("361800"), gpu_equivalent_seconds=Decimal("361800"))
        for inv in invoices for p, f in enumerate(flavors, start=1)
    ], batch_size=2000)
    tokens = {}
    for user in (admin, member):
        plaintext, prefix, digest = ApiToken.generate()
        ApiToken.objects.create(user=user, name="bench", prefix=prefix, digest=digest)
        tokens["admin" if user is admin else "member"] = plaintext
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"tokens": tokens, "period": month.strftime("%Y-%m"), "detail_id": tenants[0].pk,
            "member_slug": tenants[0].slug, "usage_rows": len(rows)}


def headers(token: str | None) -> dict[str, str]:
    # As the ingress forwards it: TLS ended there (production redirects plain http otherwise).
    h = {"Host": HOST, "X-Forwarded-Proto": "https", "Accept": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    return h


def _client(token: str | None):  # type: ignore[no-untyped-def]
    from django.test import Client

    return Client(**{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers(token).items()}, secure=True)


def count_queries(route: Route, token: str | None) -> tuple[int, int]:
    """(status, SQL queries) of one request in-process, after one warm-up request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = _client(token)
    client.get(route.path)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(route.path)
    return response.status_code, len(ctx.captured_queries)


def uncached_cpu_ms(route: Route, token: str | None, n: int) -> float:
    """inprocess_cpu_ms with the answer cache off (gpufleet/api/answercache.py): every request a miss."""
    from gpufleet.api.answercache import answer_cache

    cache = answer_cache()
    if cache is None:
        return inprocess_cpu_ms(route, token, n)
    held, cache.max_bytes = cache.max_bytes, 0
    try:
        return inprocess_cpu_ms(route, token, n)
    finally:
        cache.max_bytes = held


class Writer(threading.Thread):
    """Writes one tenant row `per_s` times a second on its own connection, as a reconcile would."""

    def __init__(self, url: str, tenant_id: int, per_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.tenant_id, self.interval = url, tenant_id, 1 / per_s
        self.stop = threading.Event()
        self.writes = 0

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(self.interval):
                conn.execute("UPDATE tenants_tenant SET updated = now() WHERE id = %s", [self.tenant_id])
                self.writes += 1


def inprocess_cpu_ms(route: Route, token: str | None, n: int) -> float:
    """CPU ms per request of the whole Django stack, in this process, one request at a time (after a
    warm-up; the best of 5 batches). Other load on the machine slows it far less than it slows req/s:
    the figure to compare runs by."""
    client = _client(token)
    client.get(route.path)
    batches = []
    for _ in range(5):  # the best of 5 batches: contention only ever adds CPU time
        started = time.process_time()
        for _ in range(max(1, n // 5)):
            client.get(route.path)
        batches.append((time.process_time() - started) / max(1, n // 5) * 1000)
    return min(batches)


def cyclic_garbage_per_request(route: Route, token: str | None, n: int) -> float:
    """Objects per request that only the cycle collector frees (Django's and DRF's request, view and resolver
    objects refer to each other): the more, the more often collector passes come, each of which stops every
    thread of a gunicorn process (gpufleet/gcfreeze.py). Counted, not timed: load does not change it."""
    import gc

    client = _client(token)
    client.get(route.path)
    gc.collect()
    gc.disable()
    try:
        for _ in range(n):
            client.get(route.path)
        return gc.collect() / n
    finally:
        gc.enable()


def full_pass_cpu_ms() -> tuple[int, float]:
    """(objects a full collector pass visits in this process, CPU ms of one: the best of 3)."""
    import gc

    best = min(_timed_collect() for _ in range(3))
    return len(gc.get_objects()), best


def _timed_collect() -> float:
    import gc

    started = time.process_time()
    gc.collect()
    return (time.process_time() - started) * 1000


def profile(route: Route, token: str | None, n: int = 200) -> str:
    from io import StringIO

    client = _client(token)
    client.get(route.path)
    prof = cProfile.Profile(time.process_time)  # CPU time: waiting on PostgreSQL is not our cost here
    started = time.perf_counter()
    prof.enable()
    for _ in range(n):
        client.get(route.path)
    prof.disable()
    per = (time.perf_counter() - started) / n * 1000
    out = StringIO()
    order, top = os.environ.get("BENCH_PROFILE_SORT", "tottime"), int(os.environ.get("BENCH_PROFILE_TOP", "20"))
    pstats.Stats(prof, stream=out).sort_stats(order).print_stats(top)
    return f"{route.name}: {per:.2f} ms per request in-process (under cProfile)\n{out.getvalue()}"


# --- load ----------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    import http.client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            conn.request("GET", "/bench/floor", headers=headers(None))
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"the server did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


def _cpu_ticks(pids: list[int]) -> dict[int, int]:
    ticks = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[pid] = int(fields[11]) + int(fields[12])  # utime + stime (the process's threads included)
    return ticks


def _spent(before: dict[int, int], after: dict[int, int]) -> int:
    """Ticks spent by the processes alive at both ends (a backend that went away is not counted)."""
    return sum(max(0, after[pid] - before[pid]) for pid in before if pid in after)


def worker_split(before: dict[int, int], after: dict[int, int], master: int) -> str:
    """Each worker's share of the workers' CPU during a run, e.g. "51/49". The kernel hands the 16 connections
    to whichever worker accepts it first, and they stay there (keep-alive): a run whose connections all
    went to one worker (e.g. "99/1") is served by one process, so one core and one GIL, whatever the chart says
    -- its p99 says so, not the code (benchmarks/history/api.md, "Round 4")."""
    spent = {pid: max(0, after[pid] - before[pid]) for pid in before if pid in after and pid != master}
    total = sum(spent.values())
    return "/".join(f"{100 * t / total:.0f}" for t in sorted(spent.values(), reverse=True)) if total else "-"


def server_pids(master: int) -> list[int]:
    pids = [master]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            pids.append(int(stat.parent.name))
    return pids


def db_backend_pids(url: str) -> list[int]:
    """PostgreSQL backends serving the bench database, if they run on this machine (visible in /proc)."""
    name = url.rsplit("/", 1)[1]
    with _admin_conn(url) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
    return [p for p in pids if Path(f"/proc/{p}/stat").exists()]


def run_wrk(port: int, route: Route, token: str | None, clients: int, duration: int) -> dict[str, Any]:
    argv = ["wrk", f"-t{min(2, clients)}", f"-c{clients}", f"-d{duration}s", "--timeout", "10s",
            "-s", str(HERE / "report.lua")]
    for k, v in headers(token).items():
        argv += ["-H", f"{k}: {v}"]
    argv.append(f"http://{HOST}:{port}{route.path}")
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    secs = summary["duration_us"] / 1e6
    return {"requests": summary["requests"], "seconds": secs, "rps": summary["requests"] / secs,
            "p50_ms": summary["p50_us"] / 1000, "p99_ms": summary["p99_us"] / 1000,
            "errors": summary["socket_errors"] + summary["non2xx"]}


def run_python(port: int, route: Route, token: str | None, clients: int, duration: int) -> dict[str, Any]:
    """Fallback client: one thread and one keep-alive connection per client, latencies of every request."""
    import http.client

    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start_gate = threading.Barrier(clients + 1)
    deadline = [0.0]
    hdrs = headers(token)

    def worker(i: int) -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=10)
        start_gate.wait()
        while (now := time.perf_counter()) < deadline[0]:
            try:
                conn.request("GET", route.path, headers=hdrs)
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    errors[i] += 1
            except OSError:
                errors[i] += 1
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=10)
                continue
            latencies[i].append(time.perf_counter() - now)
        conn.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    deadline[0] = started + duration
    start_gate.wait()
    for t in threads:
        t.join()
    secs = time.perf_counter() - started
    flat = sorted(x for per in latencies for x in per)

    def pct(p: float) -> float:
        return flat[min(len(flat) - 1, int(len(flat) * p))] * 1000 if flat else float("nan")

    return {"requests": len(flat), "seconds": secs, "rps": len(flat) / secs, "p50_ms": pct(0.50),
            "p99_ms": pct(0.99), "errors": sum(errors)}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- main ------------------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds of load per route")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="chart value, e.g. web.workers=16")
    parser.add_argument("--only", action="append", default=[], help="routes whose name contains this")
    parser.add_argument("--inprocess", type=int, default=50, help="requests per route for the in-process CPU figure")
    parser.add_argument("--no-answer-cache", action="store_true",
                        help="run the server with GPUFLEET_API_CACHE_BYTES=0 (every read computed)")
    parser.add_argument("--no-load", action="store_true", help="only the SQL counts and in-process CPU figures")
    parser.add_argument("--profile", action="store_true", help="cProfile each route in-process (no load run)")
    parser.add_argument("--gc", action="store_true",
                        help="cyclic garbage per request and a full collector pass, in-process (no load run)")
    parser.add_argument("--python-client", action="store_true", help="use the threaded http.client client")
    parser.add_argument("--keep-db", action="store_true", help="keep the database (and reuse it with --reuse-db)")
    parser.add_argument("--reuse-db", action="store_true", help="skip migrate + seed (a --keep-db run made it)")
    args = parser.parse_args()
    if not 1 <= args.duration <= 120 or not 1 <= args.clients <= 64:
        sys.exit("--duration must be 1-120 s and --clients 1-64 (a bounded run)")

    url = _database_url()
    chart_argv, config, web = chart_web(args.sets)
    tmp = Path(tempfile.mkdtemp(prefix="gpufleet-bench-api-"))
    env = server_env(config, url, tmp)
    if args.no_answer_cache:
        env["GPUFLEET_API_CACHE_BYTES"] = "0"
    os.environ.update({k: v for k, v in env.items() if k not in ("PATH", "PYTHONPATH", "HOME")})
    # Per database: engineers sharing a machine (and /tmp) each keep their own.
    seed_file = tmp.parent / f"gpufleet-bench-api.{url.rsplit('/', 1)[1]}.seed.json"
    if not args.reuse_db:
        _recreate_database(url)
    import django

    django.setup()
    import logging

    logging.disable(logging.CRITICAL)  # the in-process requests below would log JSON lines otherwise
    from django.core.management import call_command

    if args.reuse_db and seed_file.exists():
        seeded = json.loads(seed_file.read_text())
        call_command("migrate", verbosity=0)  # the branch may add migrations since the seed (a no-op if not)
        print(f"setup: reusing {url.rsplit('/', 1)[1]}")
    else:
        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        seeded = seed(args.tenants)
        seed_file.write_text(json.dumps(seeded))
        print(f"setup: {args.tenants} tenants x 3 members, {args.tenants * 4} quotas, {seeded['usage_rows']} usage "
              f"rows, {args.tenants} invoices x 4 lines in PostgreSQL ({time.perf_counter() - started:.1f} s)")
    from django.db import connection

    tokens = {**seeded["tokens"], "none": None}
    plan = routes(seeded["period"], seeded["detail_id"], seeded["member_slug"])
    if args.only:
        plan = [plan[0], *[r for r in plan[1:] if any(o in r.name for o in args.only)]]

    for route in plan:
        status, route.queries = count_queries(route, tokens[route.caller])
        if status != 200:
            sys.exit(f"{route.name}: GET {route.path} answered {status} in-process")
        route.cpu_inprocess = inprocess_cpu_ms(route, tokens[route.caller], args.inprocess)
        route.cpu_uncached = uncached_cpu_ms(route, tokens[route.caller], args.inprocess)
    if args.no_load:
        for route in plan:
            print(f"{route.name:38} {route.queries:3d} SQL  {route.cpu_inprocess:7.2f} CPU ms/req in-process "
                  f"({route.cpu_uncached:6.2f} uncached)  "
                  f"load {loadavg()}")
        connection.close()
        if not args.keep_db:
            _drop_database(url)
        return 0
    if args.gc:
        import gc

        from gpufleet.gcfreeze import load_urlconf

        for route in plan:
            print(f"{route.name:38} {cyclic_garbage_per_request(route, tokens[route.caller], args.inprocess):6.1f} "
                  f"objects of cyclic garbage per request")
        load_urlconf()  # as a web worker has (it is loaded already: every route was served)
        tracked, ms = full_pass_cpu_ms()
        gc.freeze()  # what gpufleet.wsgi does in each worker; the process ends right after
        frozen_tracked, frozen_ms = full_pass_cpu_ms()
        print(f"full collector pass: {tracked} objects, {ms:.1f} ms CPU; after gc.freeze(): {frozen_tracked} "
              f"objects, {frozen_ms:.2f} ms CPU  (load {loadavg()})")
        connection.close()
        if not args.keep_db:
            _drop_database(url)
        return 0
    if args.profile:
        for route in plan:
            print(profile(route, tokens[route.caller]))
        connection.close()
        if not args.keep_db:
            _drop_database(url)
        return 0
    connection.close()

    use_wrk = shutil.which("wrk") is not None and not args.python_client
    client_name = "wrk (C, epoll; 2 threads)" if use_wrk else "threaded http.client (Python; may be the bottleneck)"
    port = free_port()
    argv = server_argv(chart_argv, port)
    log = tmp / "server.log"
    print(f"server: {' '.join(argv[:1] + [Path(a).name if a.startswith('/') else a for a in argv[1:]])}")
    print(f"        chart web values: workerClass={web.get('workerClass', 'sync')} workers={web.get('workers')} "
          f"threads={web.get('threads')}; settings {SETTINGS}")
    print(f"client: {client_name}, {args.clients} connections, {args.duration} s per route, loopback")
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp, start_new_session=True)
    failures = []
    # A SIGTERM (a timeout, an impatient operator) still stops gunicorn and drops the database (finally:).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        wait_ready(port, proc, log)
        pids = server_pids(proc.pid)
        run = run_wrk if use_wrk else run_python
        for route in plan:
            run(port, route, tokens[route.caller], args.clients, 1)  # warm-up: connections, caches
            db_pids = db_backend_pids(url)
            before, db_before = _cpu_ticks(pids), _cpu_ticks(db_pids)
            writer = Writer(url, seeded["detail_id"], route.writes_per_s) if route.writes_per_s else None
            if writer:
                writer.start()
            result = run(port, route, tokens[route.caller], args.clients, args.duration)
            if writer:
                writer.stop.set()
                writer.join()
            hz = os.sysconf("SC_CLK_TCK")
            after = _cpu_ticks(pids)
            result["cpu_ms"] = _spent(before, after) / hz * 1000 / max(1, result["requests"])
            result["split"] = worker_split(before, after, proc.pid)
            result["db_cpu_ms"] = (_spent(db_before, _cpu_ticks(db_pids)) / hz * 1000 / max(1, result["requests"])
                                   if db_pids else None)
            result["load"] = loadavg()
            route.result = result
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if not args.keep_db:
            _drop_database(url)
            seed_file.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)

    floor = plan[0].result["rps"]
    print()
    print(f"{'route':38} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'x floor':>7} {'SQL':>4} {'in-proc':>8} "
          f"{'uncached':>8} {'app CPU':>8} {'db CPU':>7} {'err':>4} {'workers':>7}  load")
    print(f"{'':38} {'':>7} {'':>7} {'':>7} {'':>7} {'/req':>4} {'CPU ms':>8} {'CPU ms':>8} {'ms/req':>8} "
          f"{'ms/req':>7} {'':>4} {'CPU %':>7}")
    for route in plan:
        r = route.result
        db = f"{r['db_cpu_ms']:.2f}" if r["db_cpu_ms"] is not None else "n/a"
        print(f"{route.name:38} {r['rps']:7.0f} {r['p50_ms']:7.1f} {r['p99_ms']:7.1f} {r['rps'] / floor:7.2f} "
              f"{route.queries:4d} {route.cpu_inprocess:8.2f} {route.cpu_uncached:8.2f} {r['cpu_ms']:8.2f} {db:>7} "
              f"{r['errors']:4d} {r['split']:>7}  {r['load']}")
    print()
    for route in plan[1:]:
        r = route.result
        if route.rps is None:
            continue
        ok = r["rps"] >= route.rps and r["p99_ms"] <= route.p99_ms and r["errors"] == 0
        print(f"  {'PASS' if ok else 'FAIL'}  {route.name}: {r['rps']:.0f} req/s >= {route.rps:.0f}, "
              f"p99 {r['p99_ms']:.0f} ms <= {route.p99_ms:.0f} ms, {r['errors']} errors")
        if not ok:
            failures.append(route.name)
    cache = "off (--no-answer-cache)" if args.no_answer_cache else "on"
    print(f"answer cache: {cache}. Each route asks one URL again and again, so with the cache on a load run measures")
    print("  cache hits (the first request per process is a miss), except where writes are made during it;")
    print("  'uncached' is the in-process CPU of a miss, i.e. of the answer computed from the database.")
    print("in-proc CPU ms: the Django stack in the benchmark's process, one request at a time (load-insensitive-ish);")
    print("app/db CPU ms: gunicorn's processes / PostgreSQL's backends during the load run, per request served.")
    print("workers CPU %: each gunicorn worker's share of the run's worker CPU; one near 100 means the kernel gave")
    print("  that worker all the connections (keep-alive: they stay), so the run had one process's core and GIL.")
    print(f"load average at the end: {loadavg()} (2 cores; other work on the machine depresses req/s, not CPU ms/req)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
