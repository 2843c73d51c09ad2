"""`gpufleet serve`, what `make demo` runs: on a fresh var directory it starts its embedded PostgreSQL,
migrates, seeds the demo fleet, reconciles, serves the portal, and stops cleanly -- PostgreSQL with it, on
SIGTERM, Ctrl-C (SIGINT) or even SIGKILL. Data persists across restarts; two demos on two var directories
(`make demo PORT=…`) never share it. An API token made on the demo answers every call."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support.services import REFERENCE_DIR, REPO, free_port, port_open, running, wait_for


def demo_env(var: Path) -> dict[str, str]:
    """The environment of a person running the demo: no DATABASE_URL (the embedded PostgreSQL), no settings."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(GPUFLEET_VAR_DIR=str(var), GPUFLEET_REFERENCE_DIR=str(REFERENCE_DIR),
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    return env


def serve_argv(port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gpufleet.cli", "serve", f"127.0.0.1:{port}", *extra]


def postmaster(var: Path) -> int | None:
    """The pid of the demo's embedded PostgreSQL while it runs (its postmaster.pid), else None."""
    try:
        return int((var / "postgres" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    """A live process (a zombie waiting to be reaped by whoever adopted it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_serving(proc: subprocess.Popen, port: int, log: Path) -> None:
    wait_for(lambda: proc.poll() is None and port_open(port), timeout=240, what=f"gpufleet serve (log: {log})")


def test_serve_answers_the_login_page_and_stops(tmp_path: Path) -> None:
    var = tmp_path / "var"
    port = free_port()
    env = demo_env(var)
    log = tmp_path / "serve.log"
    argv = serve_argv(port)
    with running(argv, log, cwd=REPO, env=env) as proc:
        wait_serving(proc, port, log)
        server = postmaster(var)
        assert server is not None and alive(server), "the demo runs its own PostgreSQL under var/postgres"
        base = f"http://127.0.0.1:{port}"
        login = requests.get(f"{base}/login/", timeout=30)
        assert login.status_code == 200, log.read_text()[-2000:]
        assert 'name="password"' in login.text and 'name="username"' in login.text
        home = requests.get(f"{base}/", timeout=30, allow_redirects=False)
        assert home.status_code == 302 and "/login/" in home.headers["Location"]
        # The demo fleet was seeded and reconciled into the local GitOps repository.
        assert (var / "gitops" / ".git").is_dir()
        assert f"serving on http://127.0.0.1:{port}/" in log.read_text()
        # The sign-in hint names the port it serves on (`make demo PORT=8100`), not a fixed 8000.
        assert f"Sign in at http://127.0.0.1:{port}/login/" in log.read_text()
        # Signed in as alice, another team's tenant is the portal's styled 404, not Django's DEBUG page
        # listing every URL pattern; static files are still served (WhiteNoise, DEBUG off).
        alice = requests.Session()
        page = alice.get(f"{base}/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:500]
        signed_in = alice.post(f"{base}/login/", data={"username": "alice", "password": "gpufleet-demo",
                                                        "csrfmiddlewaretoken": token.group(1)},
                               headers={"Referer": f"{base}/login/"}, timeout=30)
        assert signed_in.status_code == 200 and "alice" in signed_in.text
        hidden = alice.get(f"{base}/tenants/contractors/", timeout=30)
        assert hidden.status_code == 404
        assert 'data-testid="error-404"' in hidden.text and "URLconf" not in hidden.text
        assert requests.get(f"{base}/static/portal/portal.css", timeout=30).status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert not port_open(port)
    wait_for(lambda: not alive(server), timeout=15, what="the embedded PostgreSQL to stop with the demo")


def test_make_demo_serves_on_the_port_given() -> None:
    """`make demo PORT=8100` runs `gpufleet serve` on that port (make -n: the recipe, nothing run)."""
    result = subprocess.run(["make", "-n", "demo", "PORT=8100"], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "GPUFLEET_VAR_DIR=var/port-8100 .venv/bin/gpufleet serve 127.0.0.1:8100" in result.stdout
    default = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "GPUFLEET_VAR_DIR=var .venv/bin/gpufleet serve 127.0.0.1:8000" in default.stdout


def sign_in(base: str, username: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{base}/login/", timeout=30)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    signed_in = session.post(f"{base}/login/", data={"username": username, "password": "gpufleet-demo",
                                                      "csrfmiddlewaretoken": token.group(1)},
                             headers={"Referer": f"{base}/login/"}, timeout=30)
    assert signed_in.status_code == 200 and username in signed_in.text
    return session


def new_token(base: str, username: str) -> str:
    session = sign_in(base, username)
    created = session.post(f"{base}/api/v1/tokens/", json={"name": "curl"}, timeout=30,
                           headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": f"{base}/"})
    assert created.status_code == 201, created.text[:500]
    return str(created.json()["token"])


def calls(base: str, token: str, n: int) -> list[int]:
    return [requests.get(f"{base}/api/v1/tenants/", headers={"Authorization": f"Bearer {token}"},
                         timeout=30).status_code for _ in range(n)]


@pytest.mark.timeout(900)
def test_two_demos_keep_their_own_data_and_no_postgres_outlives_them(tmp_path: Path) -> None:
    """Issue 25's walk: `make demo`, a token used 10 times (10 x 200), a second demo on another port beside
    it, the first killed with SIGKILL (its PostgreSQL goes too), restarted (the token still works: the data
    persisted), the second stopped with Ctrl-C (SIGINT)."""
    var_a, var_b = tmp_path / "a" / "var", tmp_path / "b" / "var"
    port_a, port_b = free_port(), free_port()
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    with running(serve_argv(port_a), log_a, cwd=REPO, env=demo_env(var_a)) as demo_a, \
            running(serve_argv(port_b), log_b, cwd=REPO, env=demo_env(var_b)) as demo_b:
        wait_serving(demo_a, port_a, log_a)
        wait_serving(demo_b, port_b, log_b)
        a, b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
        server_a, server_b = postmaster(var_a), postmaster(var_b)
        assert server_a and server_b and server_a != server_b
        token = new_token(a, "admin")
        assert calls(a, token, 10) == [200] * 10
        assert calls(b, token, 1) == [401]  # the other demo's database has never seen it

        demo_a.kill()  # no atexit, no signal handler: only the kernel's parent-death signal stops PostgreSQL
        demo_a.wait(timeout=30)
        wait_for(lambda: not alive(server_a), timeout=20, what="demo A's PostgreSQL to stop after SIGKILL")
        assert alive(server_b) and calls(b, new_token(b, "admin"), 3) == [200] * 3  # B is untouched

        demo_b.send_signal(signal.SIGINT)  # Ctrl-C
        demo_b.wait(timeout=30)
        wait_for(lambda: not alive(server_b), timeout=20, what="demo B's PostgreSQL to stop after Ctrl-C")

    with running(serve_argv(port_a, "--no-seed"), tmp_path / "a2.log", cwd=REPO, env=demo_env(var_a)) as again:
        wait_serving(again, port_a, tmp_path / "a2.log")
        assert calls(a, token, 10) == [200] * 10  # the token and the demo's data persisted
        restarted = postmaster(var_a)
        assert restarted and restarted != server_a
    wait_for(lambda: not alive(restarted), timeout=20, what="the restarted demo's PostgreSQL to stop")

