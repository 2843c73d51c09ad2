"""Server-side charts of simulator outputs: small inline SVG bar charts (pure: a run document in, markup
out; every label is escaped)."""

from __future__ import annotations

from html import escape
from typing import Any

BAR_H, GAP, LABEL_W, WIDTH = 18, 6, 170, 560

# What each chart compares across variants: (title, how to read it from a run).
FIGURES: list[tuple[str, Any]] = [
    ("Composite score (higher is better)", lambda r: r["score"]),
    ("Mean job wait, s", lambda r: _mean_wait(r)),
    ("Idle GPU-minutes", lambda r: r["fleet"]["idle_gpu_minutes"]),
    ("Partial-gang GPU-minutes", lambda r: r["fleet"]["partial_gang_gpu_minutes"]),
    ("Requests dropped", lambda r: sum(e["requests_dropped"] for e in r["endpoints"])),
    ("Evictions", lambda r: r["fleet"]["evictions"]),
    ("Node-hours", lambda r: r["fleet"]["node_hours"]),
]


def _mean_wait(run: dict[str, Any]) -> float:
    jobs = sum(t["jobs"] for t in run["tenants"])
    return round(sum(t["wait_mean_s"] * t["jobs"] for t in run["tenants"]) / jobs, 1) if jobs else 0.0


def bar_chart(title: str, values: list[tuple[str, float]]) -> str:
    top = max((v for _, v in values), default=0) or 1
    height = 24 + len(values) * (BAR_H + GAP)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" class="sim-chart"><title>{escape(title)}</title>',
             f'<text x="0" y="14" font-size="13" font-weight="600">{escape(title)}</text>']
    for i, (label, value) in enumerate(values):
        y = 24 + i * (BAR_H + GAP)
        w = (WIDTH - LABEL_W - 80) * value / top
        parts.append(f'<text x="0" y="{y + 13}" font-size="12">{escape(label)}</text>'
                     f'<rect x="{LABEL_W}" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="#3b6fd8"/>'
                     f'<text x="{LABEL_W + w + 6:.1f}" y="{y + 13}" font-size="12">{value:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def charts(doc: dict[str, Any]) -> list[str]:
    """One chart per figure that is not zero everywhere; a single run is one variant."""
    runs = doc["variants"] if "variants" in doc else {"run": doc}
    out = []
    for title, read in FIGURES:
        values = [(name, float(read(run))) for name, run in runs.items()]
        if any(v for _, v in values):
            out.append(bar_chart(title, values))
    return out
