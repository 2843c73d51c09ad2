"""Server-rendered charts: inline SVG, no JavaScript, no CDN. Pure (strings in, string out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from html import escape

PALETTE = ["#3b6fd6", "#e08a2e", "#3aa676", "#b2477d", "#7a5cc4", "#5f8f9f", "#c9a227", "#8a8a8a"]


def _nice_max(value: Decimal) -> Decimal:
    if value <= 0:
        return Decimal(1)
    step = Decimal(1)
    while step * 10 < value:
        step *= 10
    for factor in (1, 2, 5, 10):
        if step * factor >= value:
            return step * factor
    return step * 10


def stacked_bars(labels: Sequence[str], series: Mapping[str, Sequence[Decimal]], *, title: str,
                 unit: str, width: int = 760, height: int = 280) -> str:
    """One bar per label, stacked by series (e.g. GPU-hours per day, by flavor), with a legend."""
    left, right, top, bottom = 56, 16, 28, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum((values[i] for values in series.values()), Decimal(0)) for i in range(len(labels))]
    peak = _nice_max(max(totals, default=Decimal(0)))
    slot = plot_w / max(len(labels), 1)
    bar_w = max(slot * 0.7, 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(title)}</title>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i in range(5):  # grid and y axis
        value = peak * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{value.normalize():f}</text>')
    out.append(f'<text x="12" y="{top + plot_h / 2:.1f}" transform="rotate(-90 12 {top + plot_h / 2:.1f})" '
               f'text-anchor="middle">{escape(unit)}</text>')
    for i, label in enumerate(labels):
        x = left + slot * i + (slot - bar_w) / 2
        base = Decimal(0)
        for k, (name, values) in enumerate(series.items()):
            value = values[i]
            if value <= 0:
                continue
            y = top + plot_h - float((base + value) / peak) * plot_h
            h = float(value / peak) * plot_h
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                       f'fill="{PALETTE[k % len(PALETTE)]}"><title>{escape(label)} {escape(name)}: '
                       f'{value.quantize(Decimal("0.001"))} {escape(unit)}</title></rect>')
            base += value
        if len(labels) <= 31 and (i % max(1, len(labels) // 10) == 0):
            out.append(f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle">'
                       f'{escape(label[-2:])}</text>')
    legend_x = left
    for k, name in enumerate(series):
        out.append(f'<rect x="{legend_x}" y="{height - 16}" width="10" height="10" '
                   f'fill="{PALETTE[k % len(PALETTE)]}"/>')
        out.append(f'<text x="{legend_x + 14}" y="{height - 7}">{escape(name)}</text>')
        legend_x += 24 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out)
