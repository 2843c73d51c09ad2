"""Reconcile benchmark: 1,000 tenants x 4 flavors in PostgreSQL, rendered into a real GitOps repository.

One command: `.venv/bin/python benchmarks/reconcile.py` (or `make bench`). It creates its own
database (`gpufleet_bench` on 127.0.0.1:5432, created for the run and dropped after it;
BENCH_DATABASE_URL overrides) and a temporary GitOps repository, then measures:

1. cold: `reconcile_all` (the beat task, tasks run inline) into the empty repository;
2. no-op: `reconcile_all` again, nothing changed;
3. fleet sync no-op: `scheduling.sync_fleet` (re-apply + drift check of everything);
4. one quota change through `scheduling.actions.set_quota`: the files its commit touched must all be
   that tenant's.

Prints each figure, the no-op/cold ratio and the targets with PASS/FAIL; exits 1 on a FAIL.
Options: --tenants N (default 1000), --clusters N (default 1: the fleet spread over N host clusters, each
tenant's home on one of them round robin, every flavor offered on each with its share of the capacity),
--profile (cProfile of the no-op pass, top 25 by cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "platform")]

TARGET_NOOP_S = 3.0
TARGET_COLD_S = 60.0
FLAVORS = 4


def _database_url() -> str:
    return os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpufleet_bench")


def _recreate_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _setup_django(url: str, gitops: Path) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "gpufleet.settings.test"
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("GPUFLEET_REFERENCE_DIR", str(REPO.parent / "shared" / "reference"))
    import django
    from django.conf import settings

    django.setup()
    settings.GPUFLEET_GITOPS_REPO = str(gitops)
    settings.GPUFLEET_BACKEND = "gitops"
    settings.GPUFLEET_REFERENCE_DIR = os.environ["GPUFLEET_REFERENCE_DIR"]
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the beat task's enqueued reconciles run inline, here
    from gpufleet.celery import app

    app.conf.task_always_eager = True
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)  # one "Task succeeded" line per tenant otherwise


CLUSTER_PURPOSES = ("training", "inference", "dev")


def _clusters(count: int, n: int, flavors: list) -> list:
    """`default` plus count-1 more host clusters; each flavor's capacity split evenly among them."""
    from scheduling import actions as sched
    from scheduling import placement_actions as placing
    from scheduling.models import Cluster

    clusters = [Cluster.objects.get(name="default")]
    for i in range(1, count):
        clusters.append(placing.create_cluster(f"{CLUSTER_PURPOSES[(i - 1) % 3]}-{i}",
                                               purpose=CLUSTER_PURPOSES[(i - 1) % 3]))
    for flavor in flavors:
        share = flavor.capacity // count
        for cluster in clusters[1:]:
            sched.set_cluster_flavor(cluster.name, flavor.name, capacity=share)
    return clusters


def _populate(n: int, cluster_count: int = 1) -> tuple[list[str], dict]:
    """n trusted tenants (trusted: all four flavors allowed) with a quota on each flavor, homes spread round
    robin over `cluster_count` host clusters."""
    from scheduling import actions as sched
    from scheduling.models import Placement, Quota
    from tenants import actions
    from tenants.models import Phase, Tenant

    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    flavors = [
        sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=4 * n),
        sched.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=4 * n),
        sched.create_flavor("h100-1g", gpu_model=model.name, mode="mig", mig_profile="1g.10gb", capacity=4 * n),
        sched.create_flavor("h100-quarter", gpu_model=model.name, mode="hami", memory_percent=25,
                            cores_percent=25, capacity=8 * n),
    ]
    # Clusters and their offers first: catalog changes enqueue reconcile_all, which runs inline here.
    clusters = _clusters(cluster_count, n, flavors)
    slugs = [f"team-{i:04d}" for i in range(n)]
    for slug in slugs:
        actions.request_tenant(slug, "trusted", f"Team {slug}")
    # Already approved and provisioned once (so a reconcile does not re-apply the platform per tenant);
    # the repository is empty, which is what makes the first pass cold.
    Tenant.objects.filter(slug__in=slugs).update(phase=Phase.READY)
    tenants = list(Tenant.objects.filter(slug__in=slugs).order_by("slug"))
    home = {t.pk: clusters[i % len(clusters)] for i, t in enumerate(tenants)}
    for cluster in clusters[1:]:
        Placement.objects.filter(tenant_id__in=[pk for pk, c in home.items() if c == cluster]).update(cluster=cluster)
    # Setup data, written in bulk (set_quota's per-row audit and enqueue are measured in step 4 instead).
    Quota.objects.bulk_create(
        [Quota(tenant=t, flavor=f, cluster=home[t.pk], nominal=1, borrowing_limit=1, lending_limit=0)
         for t in tenants for f in flavors],
        batch_size=2000,
    )
    return slugs, {"flavors": flavors, "home": {t.slug: home[t.pk].tree for t in tenants}}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--clusters", type=int, default=1, help="host clusters the fleet is spread over")
    parser.add_argument("--profile", choices=["cold", "noop"], help="cProfile one pass (top 30 by own time)")
    opts = parser.parse_args()

    url = _database_url()
    _recreate_database(url)
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp:
        gitops = Path(tmp) / "gitops"
        _setup_django(url, gitops)
        from django.db import connection, reset_queries

        from scheduling import actions as sched
        from scheduling.sync import sync_fleet
        from tenants.models import Tenant
        from tenants.tasks import reconcile_all

        t0 = time.perf_counter()
        slugs, data = _populate(opts.tenants, max(1, opts.clusters))
        print(f"setup: {opts.tenants} tenants x {FLAVORS} flavors in PostgreSQL over {max(1, opts.clusters)} "
              f"cluster(s) ({time.perf_counter() - t0:.1f} s)")

        if opts.profile == "cold":
            profiler = cProfile.Profile()
            cold, count = _timed(profiler.runcall, reconcile_all)
            stats = pstats.Stats(profiler).sort_stats(os.environ.get("BENCH_SORT", "tottime"))
            stats.print_stats(os.environ.get("BENCH_FILTER", ""), 30)
            if os.environ.get("BENCH_CALLERS"):
                stats.print_callers(os.environ["BENCH_CALLERS"])
        else:
            cold, count = _timed(reconcile_all)
        files = sum(1 for _ in gitops.glob("clusters/*/tenants/*/*.yaml"))
        platform_files = sum(1 for _ in gitops.glob("clusters/*/platform/*.yaml"))
        not_ready = Tenant.objects.exclude(phase="ready").count()
        print(f"cold reconcile_all: {cold:.2f} s for {count} tenants, {files} tenant objects "
              f"({files / max(count, 1):.1f} per tenant) + {platform_files} platform objects; "
              f"{not_ready} tenants not ready; {_git(gitops, 'rev-list', '--count', 'HEAD').strip()} commits")

        head = _git(gitops, "rev-parse", "HEAD").strip()
        connection.force_debug_cursor = True
        reset_queries()
        if opts.profile == "noop":
            profiler = cProfile.Profile()
            noop, _ = _timed(profiler.runcall, reconcile_all)
        else:
            noop, _ = _timed(reconcile_all)
        queries = len(connection.queries)
        connection.force_debug_cursor = False
        unchanged = _git(gitops, "rev-parse", "HEAD").strip() == head
        print(f"no-op reconcile_all: {noop:.2f} s ({queries} SQL queries, {queries / max(count, 1):.1f} per tenant; "
              f"repository {'unchanged' if unchanged else 'CHANGED'})")
        if opts.profile == "noop":
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)

        sync_s, run = _timed(sync_fleet)
        print(f"no-op sync_fleet: {sync_s:.2f} s ({run.objects_checked} objects checked, {run.objects_changed} "
              f"changed, {run.drift_count} drifted, state {run.state})")

        slug = slugs[len(slugs) // 2]
        tenant = Tenant.objects.get(slug=slug)
        before = _git(gitops, "rev-parse", "HEAD").strip()
        change_s, _ = _timed(lambda: sched.set_quota(tenant, flavor=data["flavors"][0].name, nominal=3))
        touched = _git(gitops, "diff", "--name-only", before, "HEAD").split()
        commits = int(_git(gitops, "rev-list", "--count", f"{before}..HEAD").strip())
        own = all(path.startswith(f"{data['home'][slug]}/tenants/{slug}/") for path in touched)
        print(f"one quota change ({slug}): {change_s:.3f} s, {commits} commit(s), {len(touched)} file(s) touched: "
              f"{', '.join(touched)}")

        ratio = noop / cold if cold else float("inf")
        print(f"no-op/cold ratio: {ratio:.3f}")
        results = [
            (f"no-op reconcile_all <= {TARGET_NOOP_S:.0f} s", noop <= TARGET_NOOP_S and unchanged),
            (f"cold reconcile_all <= {TARGET_COLD_S:.0f} s", cold <= TARGET_COLD_S and not_ready == 0),
            ("quota change touches only its tenant's files (one commit)", bool(touched) and own and commits == 1),
        ]
        for label, ok in results:
            print(f"  {'PASS' if ok else 'FAIL'}  {label}")
        connection.close()
    _drop_database(url)  # leave the shared PostgreSQL as we found it
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
