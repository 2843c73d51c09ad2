"""`gpufleet serve`, what `make demo` runs: on a fresh var directory it migrates, seeds the demo fleet,
reconciles, serves the portal, and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import requests

from tests.support.services import REFERENCE_DIR, REPO, free_port, port_open, running, wait_for


def test_serve_answers_the_login_page_and_stops(tmp_path: Path) -> None:
    var = tmp_path / "var"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(GPUFLEET_VAR_DIR=str(var), GPUFLEET_REFERENCE_DIR=str(REFERENCE_DIR),
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    log = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "gpufleet.cli", "serve", f"127.0.0.1:{port}"]
    with running(argv, log, cwd=REPO, env=env) as proc:
        wait_for(lambda: proc.poll() is None and port_open(port), timeout=240,
                 what=f"gpufleet serve (log: {log})")
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


def test_make_demo_serves_on_the_port_given() -> None:
    """`make demo PORT=8100` runs `gpufleet serve` on that port (make -n: the recipe, nothing run)."""
    result = subprocess.run(["make", "-n", "demo", "PORT=8100"], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "gpufleet serve 127.0.0.1:8100" in result.stdout
    default = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "gpufleet serve 127.0.0.1:8000" in default.stdout
