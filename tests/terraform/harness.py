"""Running the real `terraform` binary against the provider of this checkout, and a fault-injecting proxy.

Terraform loads `terraform-provider-gpufleet` from the virtualenv's bin/ through a CLI config with
`dev_overrides` (no `terraform init`, no registry). Each workspace has its own CLI config, HOME and TMPDIR.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from tests.support.services import need_binary

PROVIDER_BIN = Path(sys.executable).parent
REQUIRED_PROVIDERS = 'terraform {\n  required_providers {\n    gpufleet = { source = "gpufleet/gpufleet" }\n  }\n}\n'


def cli_config(bin_dir: Path = PROVIDER_BIN) -> str:
    return ('provider_installation {\n  dev_overrides {\n'
            f'    "gpufleet/gpufleet" = "{bin_dir}"\n  }}\n  direct {{}}\n}}\n')


@dataclass
class Workspace:
    root: Path
    endpoint: str
    token: str
    binary: str = field(default_factory=lambda: need_binary("terraform", "/usr/local/bin/terraform"))
    tmp: Path = field(init=False)  # the provider's TMPDIR (`__post_init__`)

    def __post_init__(self) -> None:
        for sub in ("home", "config"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # The provider listens on a Unix socket in $TMPDIR, and a socket's path may be at most 107 bytes.
        # pytest's tmp_path is not short enough for that: under xdist it gains `popen-gwN/`, and its run
        # counter (`pytest-of-root/pytest-N`) keeps growing on a machine that runs the suite again and again,
        # so once N passed 99 every provider of a parallel run died before its handshake. A short directory
        # of its own instead, removed with the workspace.
        self.tmp = Path(tempfile.mkdtemp(prefix="gf-tf-", dir="/tmp"))
        weakref.finalize(self, shutil.rmtree, self.tmp, True)
        (self.root / "cli.tfrc").write_text(cli_config())
        if not (PROVIDER_BIN / "terraform-provider-gpufleet").exists():
            raise AssertionError("terraform-provider-gpufleet is not installed in this virtualenv (pip install -e .)")

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root / "home"),
                "TMPDIR": str(self.tmp), "TF_CLI_CONFIG_FILE": str(self.root / "cli.tfrc"),
                "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1",
                "GPUFLEET_ENDPOINT": self.endpoint, "GPUFLEET_TOKEN": self.token}

    def write(self, hcl: str) -> None:
        (self.root / "config" / "main.tf").write_text(REQUIRED_PROVIDERS + hcl)

    def run(self, *args: str, check: bool = True, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        command = [self.binary, *args, "-no-color"] if args[0] not in ("output", "state") else [self.binary, *args]
        # Own process group: on a timeout, terraform and the provider process it started are both stopped.
        process = subprocess.Popen(command, cwd=self.root / "config", env=self.env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            raise AssertionError(f"terraform {' '.join(args)} timed out after {timeout}s\n{stdout}\n{stderr}")
        result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
        if check and result.returncode != 0:
            raise AssertionError(f"terraform {' '.join(args)} exited {result.returncode}\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def apply(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-auto-approve", "-input=false", check=check)

    def plan(self) -> tuple[int, str]:
        """`plan -detailed-exitcode`: 0 = no changes, 2 = changes (1 = error, raised)."""
        result = self.run("plan", "-input=false", "-detailed-exitcode", check=False)
        if result.returncode == 1:
            raise AssertionError(f"terraform plan failed\n{result.stdout}\n{result.stderr}")
        return result.returncode, result.stdout

    def outputs(self) -> dict[str, Any]:
        raw = json.loads(self.run("output", "-json").stdout)
        return {k: v["value"] for k, v in raw.items()}


@dataclass
class Fault:
    """Answer `status` to the next matching request; `forward` first when the answer is to be lost."""

    method: str
    path_prefix: str
    status: int
    forward: bool = False
    retry_after: str | None = None


class FaultProxy:
    """A reverse proxy in front of the live server that answers scheduled faults once each, like a busy
    load balancer (429/503) or a conflicting state (409); everything else passes through unchanged."""

    def __init__(self, upstream: str, faults: list[Fault]) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = list(faults)
        self.log: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    fault = next((f for f in proxy.faults if f.method == self.command
                                  and self.path.startswith(f.path_prefix)), None)
                    if fault is not None:
                        proxy.faults.remove(fault)
                if fault is None or fault.forward:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                    upstream = requests.request(self.command, proxy.upstream + self.path, data=body, headers=headers,
                                                timeout=120, allow_redirects=False)
                if fault is None:
                    status, payload = upstream.status_code, upstream.content
                    content_type = upstream.headers.get("Content-Type", "application/json")
                    extra = {k: v for k, v in upstream.headers.items() if k in ("ETag", "Idempotent-Replayed")}
                else:
                    status, content_type, extra = fault.status, "application/problem+json", {}
                    payload = json.dumps({"type": "about:blank", "title": "injected", "status": status,
                                          "detail": f"injected {status} by the test proxy"}).encode()
                    if fault.retry_after:
                        extra["Retry-After"] = fault.retry_after
                with proxy.lock:
                    proxy.log.append((self.command, self.path, status))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
