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


def _ticks(count: int, most: int = 6) -> list[int]:
    """At most `most` evenly spaced indexes of `count` points, always the first and the last."""
    if count <= most:
        return list(range(count))
    step = (count - 1) / (most - 1)
    return sorted({round(i * step) for i in range(most)})


# A generous width of one character at font-size 10 (sans-serif digits and letters are 5.5-6 px): labels are
# measured with it, so a label judged to fit does fit.
_CHAR_PX = 6.5


def _tick_anchor(x: float, label: str, width: int) -> str:
    """Centre a tick label on its point unless that would cut it at an edge of the picture (the last day's
    "Nov 30" at the right end): then align it to end (or start) at the point, which keeps it inside."""
    half = len(label) * _CHAR_PX / 2
    if x + half > width:
        return "end"
    if x - half < 0:
        return "start"
    return "middle"


def line_chart(labels: Sequence[str], series: Mapping[str, Sequence[Decimal | None]], *, chart_id: str,
               title: str, desc: str, unit: str, dashed: Sequence[str] = (), width: int = 360,
               height: int = 220) -> str:
    """Lines over the same x labels (days), one per series; None is a gap (not measured). `dashed` series
    are drawn dashed (a forecast, a quota). Sized by its viewBox (it scales to the width it is given:
    readable at 390 px) and accessible: role=img named by its <title> and described by <desc>; the legend
    is inside the picture, one row per series, so it never overflows."""
    rows = max(len(series), 1)
    left, right, top = 40, 10, 10
    bottom = 22 + 16 * rows
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for vs in series.values() for v in vs if v is not None]
    peak = _nice_max(max(values, default=Decimal(0)))
    n = max(len(labels), 1)

    def x(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: Decimal) -> float:
        return top + plot_h - float(v / peak) * plot_h

    tid, did = f"{chart_id}-title", f"{chart_id}-desc"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="chart" '
           f'role="img" aria-labelledby="{tid} {did}" font-family="sans-serif" font-size="10" '
           f'data-testid="chart-{escape(chart_id)}">',
           f'<title id="{tid}">{escape(title)}</title>', f'<desc id="{did}">{escape(desc)}</desc>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for i in range(5):
        value = peak * i / 4
        yy = top + plot_h - plot_h * i / 4
        out.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{width - right}" y2="{yy:.1f}" stroke="#e3e3e3"/>')
        out.append(f'<text x="{left - 4}" y="{yy + 3:.1f}" text-anchor="end" fill="#333">'
                   f'{value.normalize():f}</text>')
    for i in _ticks(len(labels)):
        anchor = _tick_anchor(x(i), labels[i], width)
        out.append(f'<text x="{x(i):.1f}" y="{top + plot_h + 12}" text-anchor="{anchor}" fill="#333">'
                   f'{escape(labels[i])}</text>')
    for k, (name, vs) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        dash = ' stroke-dasharray="5 3"' if name in dashed else ""
        runs: list[list[str]] = [[]]
        for i, v in enumerate(vs):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x(i):.1f},{y(v):.1f}")
        for run in runs:
            if len(run) > 1:
                out.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" '
                           f'stroke-width="2"{dash}/>')
            elif run:
                cx, cy = run[0].split(",")
                out.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
        ly = height - 16 * (rows - k) + 2
        out.append(f'<line x1="{left}" y1="{ly}" x2="{left + 18}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        last = next((v for v in reversed(vs) if v is not None), None)
        latest = f" (latest {last.normalize():f} {unit})" if last is not None else ""
        out.append(f'<text x="{left + 24}" y="{ly + 3}" fill="#222">{escape(name)}{escape(latest)}</text>')
    out.append("</svg>")
    return "\n".join(out)
