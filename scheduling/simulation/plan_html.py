"""The autoscaling plan's Markdown (scheduling.simulator.planner.render_markdown) as HTML for the portal.

Only the subset the planner writes: `#`/`##` headings, `- ` bullets, `**bold**`, pipe tables with a `|---|`
separator row, and paragraphs. Everything is escaped first, so text from the database cannot become markup;
anything else stays a plain paragraph. (No Markdown library: the subset is ours and small.)"""

from __future__ import annotations

import re
from html import escape

BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline(text: str) -> str:
    return BOLD.sub(r"<strong>\1</strong>", escape(text))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def to_html(markdown: str) -> str:
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 3)
            out.append(f"<h{level + 1}>{_inline(line.lstrip('#').strip())}</h{level + 1}>")  # h2 under the page's h1
            i += 1
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        elif line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|?(\s*-+\s*\|)+\s*-*\s*\|?", lines[i + 1]):
            head = "".join(f'<th scope="col">{_inline(c)}</th>' for c in _cells(line))
            i += 2
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f'<div class="table-scroll"><table class="table compact"><thead><tr>{head}</tr></thead>'
                       f"<tbody>{''.join(rows)}</tbody></table></div>")
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "- ", "|")):
                para.append(lines[i].strip())
                i += 1
            if not para:  # a line no rule above took (a lone table row): plain text
                para, i = [line.strip()], i + 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
    return "\n".join(out)
