"""The `cilium` and `hubble` CLIs, through `sh`: a health check and a tenant's dropped flows.

Every failure is an infra error with a message a person can act on, never a crash:
missing binary / non-zero exit / unparseable output -> PermanentError; timeout -> TransientError.

Output shapes (recorded from upstream, see tests/isolation/fixtures/README.md):
- `cilium status -o json`: cilium-cli's status.Status (image_count, phase_count, pod_state with
  Desired/Ready/Available/Unavailable per component, errors per component and pod).
- `hubble observe -o json`: one JSON object per line, {"flow": {...}, "node_name", "time"}.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import Any

import sh

from .errors import PermanentError, TransientError

MAX_OUTPUT_LINES = 10_000


@dataclass(frozen=True)
class CiliumHealth:
    ok: bool
    problems: tuple[str, ...]
    components: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Endpoint:
    namespace: str
    pod: str
    ip: str
    labels: tuple[str, ...]

    def __str__(self) -> str:
        if self.pod:
            return f"{self.namespace}/{self.pod}"
        return self.ip or "(unknown)"


@dataclass(frozen=True)
class Flow:
    time: str
    verdict: str
    drop_reason: str
    direction: str
    source: Endpoint
    destination: Endpoint
    protocol: str
    port: int | None
    summary: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time, "verdict": self.verdict, "drop_reason": self.drop_reason,
            "direction": self.direction, "source": str(self.source), "destination": str(self.destination),
            "protocol": self.protocol, "port": self.port, "summary": self.summary,
        }


class CiliumCLI:
    def __init__(self, cilium: str = "cilium", hubble: str = "hubble", timeout: float = 10.0,
                 env: dict[str, str] | None = None) -> None:
        self.cilium, self.hubble, self.timeout, self.env = cilium, hubble, timeout, env

    def _run(self, binary: str, *args: str) -> str:
        path = shutil.which(binary, path=(self.env or {}).get("PATH")) if self.env else shutil.which(binary)
        if path is None:
            raise PermanentError(f"`{binary}` is not installed (not found on PATH); install it on the worker")
        command = sh.Command(path)
        try:
            kwargs: dict[str, Any] = {"_timeout": self.timeout, "_err_to_out": False}
            if self.env is not None:
                kwargs["_env"] = self.env
            return str(command(*args, **kwargs))
        except sh.TimeoutException as exc:
            raise TransientError(f"`{binary} {' '.join(args)}` timed out after {self.timeout:g}s") from exc
        except sh.ErrorReturnCode as exc:
            stderr = exc.stderr.decode(errors="replace").strip().splitlines()
            detail = stderr[-1] if stderr else "no error output"
            raise PermanentError(f"`{binary} {args[0]}` failed (exit {exc.exit_code}): {detail[:500]}") from exc

    def status(self) -> CiliumHealth:
        text = self._run(self.cilium, "status", "-o", "json")
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PermanentError(f"`cilium status -o json` printed something that is not JSON: {text[:80]!r}") from exc
        if not isinstance(data, dict):
            raise PermanentError("`cilium status -o json` did not print a JSON object")
        return parse_status(data)

    def dropped_flows(self, namespace: str, last: int = 100) -> list[Flow]:
        text = self._run(self.hubble, "observe", "--namespace", namespace, "--verdict", "DROPPED",
                         "--last", str(last), "-o", "json")
        return parse_flows(text)


def parse_status(data: dict[str, Any]) -> CiliumHealth:
    problems: list[str] = []
    components: dict[str, dict[str, int]] = {}
    for name, state in sorted((data.get("pod_state") or {}).items()):
        if not isinstance(state, dict):
            raise PermanentError(f"`cilium status`: pod_state.{name} is not an object")
        counts = {k.lower(): int(state.get(k, 0) or 0) for k in ("Desired", "Ready", "Available", "Unavailable")}
        components[name] = counts
        if counts["unavailable"] or counts["ready"] < counts["desired"]:
            problems.append(f"{name}: {counts['ready']}/{counts['desired']} ready, {counts['unavailable']} unavailable")
    for component, pods in sorted((data.get("errors") or {}).items()):
        for pod, errs in sorted((pods or {}).items()):
            count = len((errs or {}).get("Errors") or [])
            if count:
                problems.append(f"{component} {pod}: {count} error(s)")
    if not components:
        problems.append("no Cilium components reported (is Cilium installed in this cluster?)")
    return CiliumHealth(ok=not problems, problems=tuple(problems), components=components)


def _endpoint(raw: Any, ip: str) -> Endpoint:
    raw = raw if isinstance(raw, dict) else {}
    return Endpoint(str(raw.get("namespace", "")), str(raw.get("pod_name", "")), ip,
                    tuple(str(label) for label in raw.get("labels") or ()))


def parse_flow(obj: Any) -> Flow:
    if not isinstance(obj, dict) or not isinstance(obj.get("flow"), dict):
        raise ValueError("not a hubble flow event (no 'flow' object)")
    flow = obj["flow"]
    ip = flow.get("IP") or {}
    l4 = flow.get("l4") or {}
    protocol, port = "", None
    for name, detail in l4.items():
        protocol = name
        port = (detail or {}).get("destination_port") if isinstance(detail, dict) else None
    return Flow(
        time=str(flow.get("time") or obj.get("time") or ""),
        verdict=str(flow.get("verdict", "")),
        drop_reason=str(flow.get("drop_reason_desc") or flow.get("drop_reason") or ""),
        direction=str(flow.get("traffic_direction", "")),
        source=_endpoint(flow.get("source"), str(ip.get("source", ""))),
        destination=_endpoint(flow.get("destination"), str(ip.get("destination", ""))),
        protocol=protocol,
        port=int(port) if isinstance(port, int) else None,
        summary=str(flow.get("Summary", "")),
    )


def parse_flows(text: str) -> list[Flow]:
    """JSON lines -> flows. Non-flow events hubble may interleave (lost events) are skipped; anything
    that is not JSON at all means the output is not what we think it is: an error, not a guess."""
    flows: list[Flow] = []
    for number, line in enumerate(text.splitlines()[:MAX_OUTPUT_LINES], start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise PermanentError(f"`hubble observe` line {number} is not JSON: {line[:80]!r}") from exc
        if isinstance(obj, dict) and "flow" not in obj:
            continue  # e.g. {"lost_events": ...}
        try:
            flows.append(parse_flow(obj))
        except ValueError as exc:
            raise PermanentError(f"`hubble observe` line {number}: {exc}") from exc
    return flows
