"""Finding real components, what to do when one is missing, and running the ones that are servers.

On a developer's machine a missing part skips the test with the reason. In CI (`.ci/run` sets
GPUFLEET_REQUIRE_SERVICES=1) the same absence is a failure: CI installs everything, so a skip there
means a test silently stopped testing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE_DIR = Path(os.environ.get("GPUFLEET_REFERENCE_DIR", REPO.parent / "shared" / "reference"))


def strict() -> bool:
    return os.environ.get("GPUFLEET_REQUIRE_SERVICES", "") in {"1", "true", "yes"}


def missing(reason: str) -> None:
    """Skip (developer machine) or fail (CI) because a real part is not available."""
    if strict():
        pytest.fail(f"required component missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def need_binary(name: str, *candidates: str) -> str:
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found:
            return found
    missing(f"`{name}` is not installed")
    raise AssertionError("unreachable")


def need_reference() -> Path:
    if not (REFERENCE_DIR / "crds" / "index.json").is_file():
        missing(f"upstream reference data not found at {REFERENCE_DIR}")
    return REFERENCE_DIR


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "service") -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not become ready in {timeout}s (last error: {last})")


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def running(argv: Sequence[str], log_path: Path, *, grace: float = 10.0, **popen: Any) -> Iterator[subprocess.Popen]:
    """Run a server process (stdout and stderr to `log_path`) for the length of the block, then stop it."""
    with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, **popen)
    try:
        yield proc
    finally:
        stop(proc, grace=grace)


def stop(proc: subprocess.Popen, *, grace: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if it has not exited after `grace` seconds; always reaps it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
