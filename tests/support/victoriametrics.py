"""A real single-node VictoriaMetrics for tests and benchmarks (Debian package `victoria-metrics`).

`VictoriaMetrics.start(tmp_dir)` runs `/usr/bin/victoria-metrics` on a free loopback port with its own
storage directory, waits for `/health`, and `stop()` ends exactly the process it started. Samples are
imported in the Prometheus text format with millisecond timestamps, then `/internal/force_flush`
makes them searchable at once (otherwise they become visible only after a few seconds).

`-search.latencyOffset=0s` lets queries see samples right up to the query time (the default hides
the last 30 s), and `-retentionPeriod=100y` keeps historical test data from being dropped as too old.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.support.services import free_port, missing, stop, wait_for

BINARY_CANDIDATES = ("/usr/bin/victoria-metrics", "victoria-metrics", "victoria-metrics-prod")


def find_binary() -> str | None:
    for candidate in BINARY_CANDIDATES:
        found = shutil.which(candidate) or (candidate if os.path.isfile(candidate) else None)
        if found:
            return found
    return None


@dataclass
class VictoriaMetrics:
    url: str
    process: subprocess.Popen
    data_dir: Path
    log_path: Path
    _session: requests.Session = field(default_factory=requests.Session, repr=False)

    @classmethod
    def start(cls, data_dir: Path, *, extra_args: Iterable[str] = ()) -> VictoriaMetrics:
        binary = find_binary()
        if binary is None:
            missing("VictoriaMetrics is not installed (apt-get install victoria-metrics)")
            raise AssertionError("unreachable")
        data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log_path = data_dir / "victoria-metrics.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    binary,
                    f"-storageDataPath={data_dir / 'storage'}",
                    f"-httpListenAddr=127.0.0.1:{port}",
                    "-retentionPeriod=100y",
                    "-search.latencyOffset=0s",
                    "-loggerLevel=WARN",
                    *extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        vm = cls(url=f"http://127.0.0.1:{port}", process=process, data_dir=data_dir, log_path=log_path)
        try:
            wait_for(vm._healthy, timeout=30, what="victoria-metrics")
        except TimeoutError:
            vm.stop()
            raise
        return vm

    def _healthy(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"victoria-metrics exited: {self.log_path.read_text(errors='replace')}")
        return self._session.get(f"{self.url}/health", timeout=1).status_code == 200

    def import_prometheus(self, lines: Iterable[str], *, batch: int = 50_000) -> int:
        """POST exposition-format lines (`name{labels} value timestamp_ms`); returns lines sent."""
        sent = 0
        chunk: list[str] = []
        for line in lines:
            chunk.append(line)
            if len(chunk) >= batch:
                self._post(chunk)
                sent += len(chunk)
                chunk = []
        if chunk:
            self._post(chunk)
            sent += len(chunk)
        self.flush()
        return sent

    def _post(self, chunk: list[str]) -> None:
        body = ("\n".join(chunk) + "\n").encode()
        response = self._session.post(f"{self.url}/api/v1/import/prometheus", data=body, timeout=120)
        response.raise_for_status()

    def flush(self) -> None:
        self._session.get(f"{self.url}/internal/force_flush", timeout=60).raise_for_status()

    def delete_all(self) -> None:
        """Drop every series (tests share one server per session but want a clean slate)."""
        self._session.post(
            f"{self.url}/api/v1/admin/tsdb/delete_series", data={"match[]": '{__name__=~".+"}'}, timeout=60
        ).raise_for_status()
        self._session.get(f"{self.url}/internal/resetRollupResultCache", timeout=10)

    def stop(self) -> None:
        self._session.close()
        stop(self.process, grace=20)  # the storage dir belongs to the caller's tmp dir


def import_json_lines(url: str, lines: Iterable[str], *, batch_bytes: int = 32_000_000) -> None:
    """Bulk-load VictoriaMetrics' JSON-line format (`/api/v1/import`) in batches of about `batch_bytes`, then
    flush, so queries see every sample (the benchmarks' month of series; tests use `import_prometheus`)."""
    import requests

    session = requests.Session()
    batch: list[str] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size > batch_bytes:
            session.post(f"{url}/api/v1/import", data="\n".join(batch).encode(), timeout=600).raise_for_status()
            batch, size = [], 0
    if batch:
        session.post(f"{url}/api/v1/import", data="\n".join(batch).encode(), timeout=600).raise_for_status()
    session.get(f"{url}/internal/force_flush", timeout=120).raise_for_status()
