"""DCGM health readings from the TSDB (VictoriaMetrics or Prometheus), at one instant over one window.

Per GPU (`gpu` label) of each node (`Hostname` label, which dcgm-exporter fills from NODE_NAME; another
label with `GPUFLEET_DCGM_NODE_LABEL`), everything aggregated inside the TSDB except the XID codes:
- XIDs: `DCGM_FI_DEV_XID_ERRORS` is the *last* XID code, a gauge (0 = none since the exporter started),
  so the TSDB cannot count codes; the raw samples of the window are read and every change to a non-zero
  code is one occurrence (the value just before the window is the baseline: an XID from last week that
  is still the "last XID" does not count again). The same code twice in a row leaves the gauge unchanged;
  where the exporter's `DCGM_EXP_XID_ERRORS_COUNT{xid=...}` (reported XIDs per exporter window) is enabled,
  its maximum over the window is used when it is higher.
- flags: `max_over_time` of `DCGM_FI_DEV_ROW_REMAP_FAILURE` / `DCGM_FI_DEV_ROW_REMAP_PENDING`;
- `DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`: the count now (`last_over_time`);
- counters: `increase` over the window of `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`, `DCGM_FI_DEV_PCIE_REPLAY_COUNTER`;
- throttling: `increase` of `DCGM_FI_DEV_THERMAL_VIOLATION` / `DCGM_FI_DEV_POWER_VIOLATION` (ns, as the
  exporter's counters file documents them) as a percentage of the window.
Every non-zero reading carries its evidence: the query and the raw samples of the window.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from gpufleet.core import conf
from infra.metrics import MetricsClient, Sample

from .classify import Reading
from .models import Signal

XID_GAUGE = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
# signal -> (metric, how the window is summarised)
FIELDS: dict[str, tuple[str, str]] = {
    Signal.ROW_REMAP_FAILURE.value: ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "max_over_time"),
    Signal.ROW_REMAP_PENDING.value: ("DCGM_FI_DEV_ROW_REMAP_PENDING", "max_over_time"),
    Signal.UNCORRECTABLE_REMAPPED_ROWS.value: ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "last_over_time"),
    Signal.ECC_DBE_VOLATILE.value: ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "increase"),
    Signal.PCIE_REPLAYS.value: ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "increase"),
    Signal.THERMAL_VIOLATION.value: ("DCGM_FI_DEV_THERMAL_VIOLATION", "percent"),
    Signal.POWER_VIOLATION.value: ("DCGM_FI_DEV_POWER_VIOLATION", "percent"),
}
BASELINE_LOOKBACK = "1d"  # how far before the window the last XID value is looked for
EVIDENCE_SAMPLES = 12  # raw samples kept per reading (the first and the last ones)


def node_label() -> str:
    return conf.DCGM_NODE_LABEL or "Hostname"


def _sample(s: Sample) -> list[str]:
    return [s.at.isoformat().replace("+00:00", "Z"), format(s.value, "f")]


def _trim(samples: list[list[str]]) -> list[list[str]]:
    if len(samples) <= EVIDENCE_SAMPLES:
        return samples
    return [samples[0], *samples[-(EVIDENCE_SAMPLES - 1):]]


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class HealthSignals:
    def __init__(self, client: MetricsClient, *, window: timedelta, label: str = "") -> None:
        self.client = client
        self.window = window
        self.label = label or node_label()
        self.seconds = int(window.total_seconds())

    def readings(self, at: datetime) -> list[Reading]:
        return [*self.xid_readings(at), *self.field_readings(at)]

    # --- XIDs -------------------------------------------------------------------------------------

    def xid_readings(self, at: datetime) -> list[Reading]:
        L = self.label
        baseline: dict[tuple[str, str, str], Decimal] = {}
        for series in self.client.instant(f"last_over_time({XID_GAUGE}[{BASELINE_LOOKBACK}])",
                                          at - self.window):
            baseline[self._key(series.labels)] = series.value
        counts: dict[tuple[str, str, str], int] = {}  # (node, gpu, code) -> occurrences
        seen: dict[tuple[str, str, str], list[list[str]]] = {}
        query = f"{XID_GAUGE}[{self.seconds}s]"
        for series in self.client.instant(query, at):
            key = self._key(series.labels)
            node, gpu = series.labels.get(L, ""), series.labels.get("gpu", "")
            previous = baseline.get(key)
            for sample in series.samples:
                if sample.value > 0 and sample.value != previous:
                    code = format(sample.value.to_integral_value(), "f")
                    counts[(node, gpu, code)] = counts.get((node, gpu, code), 0) + 1
                    seen.setdefault((node, gpu, code), []).append(_sample(sample))
                previous = sample.value
        exporter: dict[tuple[str, str, str], Decimal] = {}
        count_query = f"max by ({L}, gpu, xid) (max_over_time({XID_COUNT}[{self.seconds}s]))"
        for series in self.client.instant(count_query, at):
            code = series.labels.get("xid", "")
            if series.value > 0 and code:
                exporter[(series.labels.get(L, ""), series.labels.get("gpu", ""), code)] = series.value
        out = []
        for key in sorted(set(counts) | set(exporter)):
            node, gpu, code = key
            from_gauge, from_counter = Decimal(counts.get(key, 0)), exporter.get(key, Decimal(0))
            evidence: dict[str, Any] = {"source": "tsdb", "query": query, "node_label": L,
                                        "samples": _trim(seen.get(key, []))}
            if from_counter > from_gauge:
                evidence.update(query=count_query, counted_by=XID_COUNT, samples=[])
            out.append(Reading(node, Signal.XID.value, code, max(from_gauge, from_counter), gpu, evidence))
        return out

    def _key(self, labels: Mapping[str, str]) -> tuple[str, str, str]:
        # One series per GPU (and MIG instance): the node, the GPU and the instance identify it.
        return (labels.get(self.label, ""), labels.get("gpu", ""), labels.get("GPU_I_ID", ""))

    # --- the other fields ---------------------------------------------------------------------------

    def field_query(self, signal: str) -> str:
        metric, how = FIELDS[signal]
        L, W = self.label, f"{self.seconds}s"
        if how == "percent":
            # ns throttled in the window / ns in the window, as a percentage; computed in the TSDB.
            return f"max by ({L}, gpu) (increase({metric}[{W}])) / {self.seconds * 10**9} * 100"
        return f"max by ({L}, gpu) ({how}({metric}[{W}]))"

    def field_readings(self, at: datetime) -> list[Reading]:
        out = []
        for signal, (metric, _) in FIELDS.items():
            query = self.field_query(signal)
            for series in self.client.instant(query, at):
                if series.value <= 0:
                    continue
                node, gpu = series.labels.get(self.label, ""), series.labels.get("gpu", "")
                out.append(Reading(node, signal, "", series.value, gpu, {
                    "source": "tsdb", "query": query, "node_label": self.label,
                    "samples": self.raw_samples(metric, node, gpu, at)}))
        return out

    def raw_samples(self, metric: str, node: str, gpu: str, at: datetime) -> list[list[str]]:
        """The window's raw samples of one GPU's series: the evidence a person can check."""
        selector = f'{metric}{{{self.label}="{_quote(node)}",gpu="{_quote(gpu)}"}}[{self.seconds}s]'
        series = self.client.instant(selector, at)
        samples = sorted((s for one in series for s in one.samples), key=lambda s: s.timestamp)
        return _trim([_sample(s) for s in samples])
