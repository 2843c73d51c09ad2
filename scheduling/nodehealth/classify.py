"""Signals -> a node's health state and its reasons. Pure: no database, no network.

A `Reading` is one measured value of one signal on one GPU (or on the node, for conditions) with the
evidence behind it (the query and the samples). Each rule whose signal/match it meets at or above the
threshold fires; the node's state is the most severe fired state; per signal/match only the most
severe firing is reported, so "XID 79 x2" says `replace`, not also `drain`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .models import SEVERITY, Signal, State
from .rules import Rule


@dataclass(frozen=True)
class Reading:
    node: str
    signal: str
    match: str  # XID code, condition type, or "" for the others
    value: Decimal
    gpu: str = ""  # the GPU index ("" for node-level signals)
    evidence: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Reason:
    rule: Rule
    reading: Reading

    @property
    def text(self) -> str:
        r, rd = self.rule, self.reading
        where = f" on GPU {rd.gpu}" if rd.gpu else ""
        if r.signal == Signal.XID:
            what = f"XID {r.match} x{_num(rd.value)}{where} in the window"
        elif r.signal == Signal.NODE_CONDITION:
            what = f"node condition {r.match}=True"
        elif r.signal in (Signal.THERMAL_VIOLATION, Signal.POWER_VIOLATION):
            what = f"{r.signal.replace('_', ' ')} {_num(rd.value)} % of the window{where}"
        else:
            what = f"{r.signal.replace('_', ' ')} {_num(rd.value)}{where}"
        return f"{what} (>= {_num(r.threshold)} -> {r.state}): {r.description}".rstrip(": ")

    def as_dict(self) -> dict[str, Any]:
        return {"signal": self.rule.signal, "match": self.rule.match, "gpu": self.reading.gpu,
                "value": str(self.reading.value), "threshold": str(self.rule.threshold), "state": self.rule.state,
                "text": self.text, "evidence": self.reading.evidence}


@dataclass(frozen=True)
class Classification:
    node: str
    state: str
    reasons: tuple[Reason, ...]

    @property
    def reason_texts(self) -> list[str]:
        return [r.text for r in self.reasons]

    @property
    def evidence(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.reasons]


def _num(value: Decimal) -> str:
    text = format(value.normalize(), "f") if value == value.to_integral_value() else format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def classify(node: str, readings: Iterable[Reading], rules: Iterable[Rule]) -> Classification:
    by_key: dict[tuple[str, str], list[Rule]] = {}
    for rule in rules:
        by_key.setdefault((rule.signal, rule.match), []).append(rule)
    best: dict[tuple[str, str, str], Reason] = {}
    for reading in readings:
        if reading.node != node:
            continue
        for rule in by_key.get((reading.signal, reading.match), []):
            if reading.value < rule.threshold:
                continue
            key = (reading.signal, reading.match, reading.gpu)
            current = best.get(key)
            if current is None or SEVERITY[rule.state] > SEVERITY[current.rule.state]:
                best[key] = Reason(rule, reading)
    # Most severe first, then by signal, match, GPU: a stable order for the CLI and the tests.
    reasons = tuple(sorted(best.values(), key=lambda r: (-SEVERITY[r.rule.state], r.rule.signal,
                                                         r.rule.match.zfill(6), r.reading.gpu.zfill(4))))
    state = reasons[0].rule.state if reasons else State.HEALTHY.value
    return Classification(node, state, reasons)
