"""The classification table: defaults (seeded by the migration), validation, and loading it for `classify`.

Defaults follow NVIDIA's XID guidance and the DCGM health-check actions (the XID catalog's "immediate
action" buckets, the device plugin's list of application XIDs, NVSentinel's DCGM error mapping):
- application XIDs (13, 31, 43, 45) are the workload's fault: no node action. 13 and 31 repeating on one
  node (3+ in the window) is worth a look (`watch`: run DCGM diagnostics);
- informational / correctable (63 row-remap recorded, 92 high SBE rate, 94 contained ECC error,
  uncorrectable remapped rows, PCIe replays, throttling): `watch`;
- the device plugin withdrew GPUs, or an agent reports an XID without saying which: `cordon` (no new
  work; running work keeps going);
- needs a GPU reset or a reboot (48, 61, 62, 64, 74, 79, 95, 119, 120, 140, pending row remap, volatile
  DBE, fallen off the bus): `drain` (cordon, then evict through the Eviction API);
- RMA candidates (row-remap failure; 64, 79, 48, 95 recurring within the window): `replace`.
Values: XID = occurrences in the window; counters = increase over the window; remap failure/pending =
the flag; uncorrectable remapped rows = the count now; throttling = percent of the window throttled.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .models import HealthRule, Signal, State

MATCH_REQUIRED = {Signal.XID, Signal.NODE_CONDITION}
PERCENT_SIGNALS = {Signal.THERMAL_VIOLATION, Signal.POWER_VIOLATION}


@dataclass(frozen=True)
class Rule:
    signal: str
    match: str
    threshold: Decimal
    state: str
    description: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "match": self.match, "threshold": str(self.threshold), "state": self.state,
                "description": self.description}


def _xid(code: int, threshold: int, state: State, description: str) -> Rule:
    return Rule(Signal.XID.value, str(code), Decimal(threshold), state.value, description)


def _cond(kind: str, state: State, description: str) -> Rule:
    return Rule(Signal.NODE_CONDITION.value, kind, Decimal(1), state.value, description)


W, C, D, R = State.WATCH, State.CORDON, State.DRAIN, State.REPLACE
DEFAULT_RULES: tuple[Rule, ...] = (
    _xid(13, 3, W, "graphics engine exception repeating: application error unless it repeats; run DCGM diag"),
    _xid(31, 3, W, "GPU memory page fault repeating: application error unless it repeats; run DCGM diag"),
    _xid(48, 1, D, "double-bit ECC error: GPU reset or reboot needed"),
    _xid(48, 3, R, "double-bit ECC errors recurring: field diagnostics / RMA"),
    _xid(61, 1, D, "internal micro-controller breakpoint: reset the GPU"),
    _xid(62, 1, D, "internal micro-controller halt: reset the GPU"),
    _xid(63, 1, W, "row-remapping recorded: reset the GPU when convenient"),
    _xid(64, 1, D, "row-remapping recording failure: reboot now"),
    _xid(64, 2, R, "row-remapping recording failures recurring: RMA candidate"),
    _xid(74, 1, D, "NVLink error: GPU reset or reboot needed"),
    _xid(79, 1, D, "GPU has fallen off the bus: power-cycle the node"),
    _xid(79, 2, R, "GPU fell off the bus again: hardware (PCIe link / board)"),
    _xid(92, 1, W, "high single-bit ECC error rate: field diagnostics"),
    _xid(94, 1, W, "contained ECC error: the application restarts; reset the GPU when convenient"),
    _xid(95, 1, D, "uncontained ECC error: reset the GPU / reboot before work resumes"),
    _xid(95, 3, R, "uncontained ECC errors recurring: RMA candidate"),
    _xid(119, 1, D, "GSP RPC timeout: reset the GPU"),
    _xid(120, 1, D, "GSP error: reset the GPU"),
    _xid(140, 1, D, "unrecoverable ECC error escape: reset the GPU"),
    Rule(Signal.ROW_REMAP_FAILURE.value, "", Decimal(1), R.value, "row remapping failed: RMA candidate"),
    Rule(Signal.ROW_REMAP_PENDING.value, "", Decimal(1), D.value, "row remap pending: a GPU reset applies it"),
    Rule(Signal.UNCORRECTABLE_REMAPPED_ROWS.value, "", Decimal(1), W.value,
         "rows remapped for uncorrectable errors: watch the count"),
    Rule(Signal.ECC_DBE_VOLATILE.value, "", Decimal(1), D.value, "volatile double-bit ECC errors: reset the GPU"),
    Rule(Signal.PCIE_REPLAYS.value, "", Decimal(100), W.value, "PCIe replays: check the link"),
    Rule(Signal.PCIE_REPLAYS.value, "", Decimal(10000), C.value, "PCIe replay storm: field diagnostics"),
    Rule(Signal.THERMAL_VIOLATION.value, "", Decimal(10), W.value, "thermal throttling: check cooling"),
    Rule(Signal.POWER_VIOLATION.value, "", Decimal(25), W.value, "power throttling: check power capping"),
    Rule(Signal.UNHEALTHY_GPUS.value, "", Decimal(1), C.value, "the device plugin withdrew GPUs from allocatable"),
    _cond("GPUMissing", D, "fewer GPUs than the machine type has (AKS node problem detector)"),
    _cond("GPUXIDErrors", C, "XID errors in the kernel log (AKS node problem detector)"),
    _cond("SysLogsXIDError", C, "XID error in the kernel log (NVSentinel)"),
    _cond("SysLogsGPUFallenOff", D, "GPU fell off the bus (NVSentinel)"),
    _cond("GpuMemWatch", D, "DCGM memory health check failed (NVSentinel)"),
    _cond("GpuNvlinkWatch", D, "DCGM NVLink health check failed (NVSentinel)"),
    _cond("GpuAllWatch", D, "DCGM health check failed (NVSentinel)"),
    _cond("GpuDriverUnresponsive", D, "driver unresponsive (NVSentinel)"),
    _cond("GpuPcieWatch", W, "DCGM PCIe health check warned (NVSentinel)"),
    _cond("GpuThermalWatch", W, "DCGM thermal health check warned (NVSentinel)"),
)


class RuleError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def validate_rule(signal: Any, match: Any, threshold: Any, state: Any) -> Rule:
    """A rule as typed by an admin, checked field by field (RuleError names the field)."""
    if signal not in Signal.values:
        raise RuleError("signal", f"must be one of {', '.join(Signal.values)}")
    if state not in State.values or state == State.HEALTHY:
        raise RuleError("state", "must be one of watch, cordon, drain, replace")
    match = "" if match is None else str(match)
    if signal in MATCH_REQUIRED and not match:
        raise RuleError("match", f"a {signal} rule names what it matches (the XID code / the condition type)")
    if signal not in MATCH_REQUIRED and match:
        raise RuleError("match", f"a {signal} rule matches nothing (leave it empty)")
    if signal == Signal.XID and not (match.isascii() and match.isdigit() and 0 < int(match) < 1000):
        raise RuleError("match", "an XID code is a number from 1 to 999")
    if signal == Signal.NODE_CONDITION and not (match.isascii() and match.isidentifier()):
        raise RuleError("match", "a node condition type is a word such as GpuMemWatch")
    if isinstance(threshold, bool | float):
        raise RuleError("threshold", "a decimal number as a string or integer")
    try:
        value = Decimal(str(threshold))
    except (InvalidOperation, ValueError):
        raise RuleError("threshold", "must be a number") from None
    if not value.is_finite() or value <= 0:
        raise RuleError("threshold", "must be greater than 0")
    if signal in PERCENT_SIGNALS and value > 100:
        raise RuleError("threshold", "a percentage of the window, at most 100")
    return Rule(str(signal), match, value, str(state))


def seed_defaults(model: type[HealthRule] | Any) -> int:
    """Insert the default rules that are missing (by signal, match, state); returns how many."""
    added = 0
    for rule in DEFAULT_RULES:
        _, created = model.objects.get_or_create(
            signal=rule.signal, match=rule.match, state=rule.state,
            defaults={"threshold": rule.threshold, "description": rule.description})
        added += created
    return added


def active_rules() -> list[Rule]:
    return [Rule(r.signal, r.match, r.threshold, r.state, r.description)
            for r in HealthRule.objects.filter(enabled=True)]
