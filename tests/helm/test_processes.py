"""The chart's containers, run here for real: each test takes the command, arguments and environment a
rendered pod would get (ConfigMap + secretKeyRefs resolved from a test Secret) and runs them against the
real PostgreSQL and Redis. Only what cannot exist outside a pod is swapped, and named where it is: the
listen address (loopback), the volume paths (a temp dir) and the push interval.

This proves what rendering alone cannot: the production settings start with exactly the variables the
chart provides, the migrate hook migrates, the web probe's Host header gets an answer, the worker's
liveness command answers, beat starts with its schedule under /tmp, and the push sidecar publishes main.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

from infra.gitops.git import Git
from tests.support.services import REFERENCE_DIR, REPO, free_port, missing, need_binary, port_open, wait_for

from .chart import Rendered, containers, guide_install_values, render

VENV_BIN = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    """The chart rendered with the operator guide's own install command (docs/operator-guide.md)."""
    values = guide_install_values()
    assert values["gitops"]["push"]["enabled"] is True and values["image"]["repository"]
    return render(values)


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database: the migrate hook must build the schema from nothing."""
    import psycopg

    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    name = f"gpufleet_helm_{os.getpid()}"
    parts = urlsplit(base)
    # The server's maintenance database, as Django does: DATABASE_URL's own database need not exist
    # (a fresh machine running `make test` has none; the test databases are created per run).
    server = urlunsplit(parts._replace(path="/postgres"))
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        missing(f"PostgreSQL is not reachable at {server}: {exc}")
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def secret(database: str) -> dict[str, str]:
    """The operator's Secret (secrets.existingSecret), as the kubelet would resolve it."""
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    host, port = urlsplit(broker).hostname or "127.0.0.1", urlsplit(broker).port or 6379
    with socket.socket() as sock:
        sock.settimeout(2)
        if sock.connect_ex((host, port)) != 0:
            missing(f"Redis is not reachable at {broker}")
    return {"SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": database, "CELERY_BROKER_URL": broker,
            "OIDC_RP_CLIENT_SECRET": secrets.token_urlsafe(24)}


def pod_env(rendered: Rendered, container: dict[str, Any], secret: dict[str, str], var_dir: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(rendered.get("ConfigMap", source["configMapRef"]["name"])["data"])
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        if "fieldRef" in item["valueFrom"]:  # the downward API: the pod's IP is this machine's loopback here
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", item
            env[item["name"]] = "127.0.0.1"
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        if ref["key"] in secret:
            env[item["name"]] = secret[ref["key"]]
        else:
            assert ref.get("optional"), f"{item['name']}: required key {ref['key']} is not in the Secret"
    # The pod's volumes, here: the GitOps volume and the reference data baked into the image.
    env.update({
        "GPUFLEET_VAR_DIR": str(var_dir),
        "GPUFLEET_GITOPS_REPO": str(var_dir / "gitops"),
        "GPUFLEET_REFERENCE_DIR": str(REFERENCE_DIR),
        "HOME": str(var_dir),
        "PROMETHEUS_MULTIPROC_DIR": str(var_dir),  # the pod's /tmp emptyDir
        # A queue of its own, so the worker started here takes no other suite's task from a shared broker.
        "CELERY_TASK_DEFAULT_QUEUE": f"helm-test-{os.getpid()}",
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
    })
    return env


class Process:
    """A container's process on this machine; output in a file, stopped (and waited for) by the test."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent,
                                         start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def argv(container: dict[str, Any]) -> list[str]:
    return [*container["command"], *container.get("args", [])]


def container(rendered: Rendered, kind: str, name: str, which: str) -> dict[str, Any]:
    return {c["name"]: c for c in containers(rendered.get(kind, name))}[which]


@pytest.fixture(scope="module")
def migrated(rendered: Rendered, secret: dict[str, str], tmp_path_factory) -> dict[str, str]:
    """Run the migrate hook's container once for the module (it is the pre-install step)."""
    job = container(rendered, "Job", "gpufleet-migrate-1", "migrate")
    env = pod_env(rendered, job, secret, tmp_path_factory.mktemp("migrate"))
    done = subprocess.run(argv(job), env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return env


def test_migrate_hook_builds_the_schema_from_an_empty_database(migrated, secret):
    import psycopg

    with psycopg.connect(secret["DATABASE_URL"]) as conn:
        apps = {row[0] for row in conn.execute("SELECT DISTINCT app FROM django_migrations")}
    assert {"tenants", "scheduling", "billing", "audit", "accounts"} <= apps


def test_production_settings_refuse_to_start_without_the_secret(rendered, secret, tmp_path):
    """The Secret really is required: without SECRET_KEY the same command stops, naming it."""
    job = container(rendered, "Job", "gpufleet-migrate-1", "migrate")
    env = pod_env(rendered, job, secret, tmp_path)
    del env["SECRET_KEY"]
    done = subprocess.run(argv(job), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "SECRET_KEY must be set" in done.stderr


def test_web_serves_the_probe_path_for_the_probe_host(rendered, secret, migrated, tmp_path):
    web = container(rendered, "Deployment", "gpufleet-web", "web")
    port = free_port()
    args = argv(web)
    # Swapped: loopback instead of 0.0.0.0, and one gunicorn worker on this 2-core machine.
    args = [f"--bind=127.0.0.1:{port}" if a.startswith("--bind=") else a for a in args]
    args = ["--workers=1" if a.startswith("--workers=") else a for a in args]
    assert "--worker-tmp-dir=/tmp" in args
    process = Process(args, pod_env(rendered, web, secret, tmp_path), tmp_path / "web.log")
    try:
        wait_for(lambda: port_open(port) or not process.alive(), timeout=60, what="gunicorn")
        assert process.alive(), process.output()[-3000:]
        for name in ("readinessProbe", "livenessProbe"):
            probe = web[name]["httpGet"]
            headers = {h["name"]: h["value"] for h in probe["httpHeaders"]}
            answer = requests.get(f"http://127.0.0.1:{port}{probe['path']}", headers=headers, timeout=10,
                                  allow_redirects=False)
            assert 200 <= answer.status_code < 400, answer.text[:500]  # the kubelet's success range
        # /metrics in gunicorn's multiprocess mode (PROMETHEUS_MULTIPROC_DIR from the ConfigMap).
        scraped = requests.get(f"http://127.0.0.1:{port}/metrics", headers=headers, timeout=10)
        assert scraped.status_code == 200 and "gpufleet_http_request_duration_seconds_count" in scraped.text
        # `helm test`'s pod command, pointed at this gunicorn instead of the Service.
        check = rendered.get("Pod", "gpufleet-test-web")["spec"]["containers"][0]
        check_env = {e["name"]: e["value"] for e in check["env"]}
        check_env.update({"GPUFLEET_CHECK_URL": f"http://127.0.0.1:{port}", "PATH": os.environ["PATH"]})
        passed = subprocess.run([sys.executable if a == "python" else a for a in argv(check)], env=check_env,
                                capture_output=True, text=True, timeout=60)
        assert passed.returncode == 0 and "ok" in passed.stdout, passed.stdout + passed.stderr
        failed = subprocess.run([sys.executable if a == "python" else a for a in argv(check)],
                                env={**check_env, "GPUFLEET_CHECK_HOST": "evil.example"},
                                capture_output=True, text=True, timeout=60)
        assert failed.returncode == 1 and "unexpected answers" in failed.stdout
        # And Django's host check is live: a name outside ALLOWED_HOSTS is refused.
        refused = requests.get(f"http://127.0.0.1:{port}/login/", headers={"Host": "evil.example"}, timeout=10)
        assert refused.status_code == 400
    finally:
        process.stop()


def test_worker_answers_its_liveness_probe(rendered, secret, tmp_path):
    worker = container(rendered, "Deployment", "gpufleet-worker", "worker")
    args = ["--concurrency=1" if a.startswith("--concurrency=") else a for a in argv(worker)]
    env = pod_env(rendered, worker, secret, tmp_path)
    process = Process(args, env, tmp_path / "worker.log")
    probe = worker["livenessProbe"]["exec"]["command"]
    try:
        wait_for(lambda: "ready." in process.output() or not process.alive(), timeout=90, what="celery worker")
        assert process.alive(), process.output()[-3000:]
        # In a pod HOSTNAME is the pod name, which is the worker's node name; here, this machine's.
        probe_env = {**env, "HOSTNAME": socket.gethostname()}
        answer = subprocess.run(probe, env=probe_env, capture_output=True, text=True, timeout=60)
        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert "pong" in answer.stdout
        # The probe fails for a node that is not there (it is not a test that cannot fail).
        wrong = subprocess.run(probe, env={**env, "HOSTNAME": "no-such-pod"}, capture_output=True, text=True,
                               timeout=60)
        assert wrong.returncode != 0
        # Redis down: the probe must not fail (every worker pod would be restarted at once, for nothing).
        down = f"redis://127.0.0.1:{free_port()}/0"
        broker_down = subprocess.run(probe, env={**probe_env, "CELERY_BROKER_URL": down}, capture_output=True,
                                     text=True, timeout=60)
        assert broker_down.returncode == 0, broker_down.stdout + broker_down.stderr
        assert "broker unreachable" in broker_down.stdout
    finally:
        process.stop()


def test_beat_starts_with_its_schedule_in_tmp(rendered, secret, tmp_path):
    beat = container(rendered, "Deployment", "gpufleet-beat", "beat")
    args = argv(beat)
    assert "--schedule=/tmp/celerybeat-schedule" in args
    # Swapped: the pod's /tmp (an emptyDir) is a temp dir here.
    args = [f"--schedule={tmp_path}/celerybeat-schedule" if a.startswith("--schedule=") else a for a in args]
    process = Process(args, pod_env(rendered, beat, secret, tmp_path), tmp_path / "beat.log")
    try:
        wait_for(lambda: "beat: Starting" in process.output() or not process.alive(), timeout=60, what="beat")
        assert process.alive(), process.output()[-3000:]
        wait_for(lambda: any(tmp_path.glob("celerybeat-schedule*")), timeout=30, what="beat schedule file")
    finally:
        process.stop()


def _branch(path: Path, branch: str = "main") -> str:
    return Git(path).run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).strip()


def test_push_sidecar_publishes_main_to_the_remote(rendered, tmp_path):
    need_binary("git")
    push = container(rendered, "Deployment", "gpufleet-worker", "gitops-push")
    env = {e["name"]: e["value"] for e in push["env"]}
    source, remote = tmp_path / "state" / "gitops", tmp_path / "remote.git"
    Git(tmp_path).run("init", "-q", "--bare", str(remote))
    git = Git(source)
    git.ensure_repo()
    # Swapped: the volume path, the remote (a local bare repository) and the interval (30 s -> 1 s).
    # Swapped too: the status volume's path.
    env.update({"GPUFLEET_GITOPS_REPO": str(source), "GPUFLEET_PUSH_URL": str(remote),
                "GPUFLEET_PUSH_INTERVAL": "1", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
                "GPUFLEET_PUSH_STATUS_DIR": str(tmp_path / "push-status")})
    env.pop("GIT_SSH_COMMAND")  # no ssh to a local path
    process = Process(argv(push), env, tmp_path / "push.log")
    try:
        wait_for(lambda: _branch(remote) == git.head(), timeout=30, what="first push")
        (source / "tenants").mkdir()
        (source / "tenants" / "a.yaml").write_text("kind: Namespace\n")
        new_head = git.commit_paths(["tenants/a.yaml"], "tenant a")
        wait_for(lambda: _branch(remote) == new_head, timeout=30, what="second push")
        assert process.alive()
    finally:
        process.stop()
    # An unreachable remote is reported and retried, never fatal.
    env["GPUFLEET_PUSH_URL"] = str(tmp_path / "no-such-remote.git")
    failing = Process(argv(push), env, tmp_path / "push-fail.log")
    try:
        wait_for(lambda: "gitops-push: unreachable" in failing.output(), timeout=30, what="push failure report")
        time.sleep(1.5)
        assert failing.alive()
        assert "state=unreachable" in (tmp_path / "push-status" / "push-status").read_text()
    finally:
        failing.stop()


def test_two_migrate_hooks_never_run_at_once(rendered, secret, tmp_path):
    """Issue 16 §3: two migrate Jobs (successive revisions, a retry) against one fresh database. While a
    migrate holds the advisory lock, both wait and touch nothing; released, they run one after the other
    and both succeed (the second finds nothing to do)."""
    import psycopg

    from gpufleet.portal.management.commands.migrate import MIGRATE_LOCK

    base = secret["DATABASE_URL"]
    fresh = urlunsplit(urlsplit(base)._replace(path=f"/gpufleet_helm_lock_{os.getpid()}"))
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{urlsplit(fresh).path[1:]}"')
        admin.execute(f'CREATE DATABASE "{urlsplit(fresh).path[1:]}"')
    job = container(rendered, "Job", "gpufleet-migrate-1", "migrate")
    assert any(a.startswith("--lock-timeout=") for a in argv(job))
    processes: list[Process] = []
    try:
        with psycopg.connect(fresh, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATE_LOCK)  # a migrate already running
            for n in (1, 2):
                env = {**pod_env(rendered, job, secret, tmp_path / f"m{n}"), "DATABASE_URL": fresh}
                (tmp_path / f"m{n}").mkdir()
                processes.append(Process(argv(job), env, tmp_path / f"m{n}" / "migrate.log"))
            wait_for(lambda: all("Waiting for another migrate" in p.output() for p in processes), timeout=60,
                     what="both migrate runs waiting for the lock")
            time.sleep(2)
            assert all(p.alive() for p in processes)
            tables = holder.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'django_migrations'").fetchone()
            assert tables == (0,), "a migrate ran while another held the lock"
        # The holder's session ended: the lock is free.
        for process in processes:
            process.proc.wait(timeout=240)
            assert process.proc.returncode == 0, process.output()[-3000:]
        with psycopg.connect(fresh) as conn:
            duplicates = conn.execute(
                "SELECT app, name FROM django_migrations GROUP BY app, name HAVING count(*) > 1").fetchall()
            applied = conn.execute("SELECT count(DISTINCT app) FROM django_migrations").fetchone()
        assert duplicates == [] and applied[0] >= 5
    finally:
        for process in processes:
            process.stop()
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{urlsplit(fresh).path[1:]}" WITH (FORCE)')


def test_a_migrate_waiting_too_long_fails_saying_why(rendered, secret, migrated, tmp_path):
    import psycopg

    from gpufleet.portal.management.commands.migrate import MIGRATE_LOCK

    job = container(rendered, "Job", "gpufleet-migrate-1", "migrate")
    args = [a if not a.startswith("--lock-timeout=") else "--lock-timeout=2" for a in argv(job)]
    with psycopg.connect(secret["DATABASE_URL"], autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", MIGRATE_LOCK)
        done = subprocess.run(args, env=pod_env(rendered, job, secret, tmp_path), capture_output=True, text=True,
                              timeout=120)
    assert done.returncode != 0
    assert "another migrate is still running" in done.stderr
