"""A private PostgreSQL 15 cluster (initdb + pg_ctl) on a free port, for tests that restart the database.

Never the machine's shared server: other test runs use it. initdb refuses to run as root, so the
cluster is created and run as the `postgres` system user (runuser) when the tests run as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .services import free_port, missing

BIN = Path(os.environ.get("GPUFLEET_PG_BIN", "/usr/lib/postgresql/15/bin"))


@dataclass
class PostgresServer:
    data: Path
    port: int
    as_user: list[str]

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/gpufleet"

    def pg_ctl(self, *args: str) -> list[str]:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        return [*self.as_user, str(BIN / "pg_ctl"), "-D", str(self.data), "-w", "-l", str(self.data / "log"),
                "-o", options, *args]

    def restart_command(self) -> list[str]:
        return self.pg_ctl("-m", "fast", "restart")


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    if not (BIN / "initdb").is_file():
        missing(f"PostgreSQL server binaries not found in {BIN} (Debian package postgresql-15)")
    as_user: list[str] = []
    # Not under pytest's tmp dir: that is private to root, and the server may run as `postgres`.
    data = Path(tempfile.mkdtemp(prefix="gpufleet-pg-")) / "pgdata"
    data.mkdir()
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            missing("running as root without `runuser`: initdb cannot run as root")
        as_user = [str(runuser), "-u", "postgres", "--"]
        shutil.chown(data.parent, "postgres")
        shutil.chown(data, "postgres")
    subprocess.run([*as_user, str(BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"],
                   check=True, capture_output=True)
    server = PostgresServer(data, free_port(), as_user)
    subprocess.run(server.pg_ctl("start"), check=True, capture_output=True)
    try:
        subprocess.run([*as_user, str(BIN / "createdb"), "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres",
                        "gpufleet"], check=True, capture_output=True)
        yield server
    finally:
        subprocess.run(server.pg_ctl("-m", "immediate", "stop"), check=False, capture_output=True)
        shutil.rmtree(data.parent, ignore_errors=True)
