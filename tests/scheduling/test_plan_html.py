"""The autoscaling plan renders its Markdown on the portal (issue 28, item 4), escaped."""

from __future__ import annotations

from scheduling.simulation.plan_html import to_html

PLAN = """# Autoscaling plan: acme/<chat>

Traffic: 48 hours <b>simulated</b>.

## Recommended settings

- Endpoint signal: **queue depth**
- Minimum replicas: **1**

| layer | option | score |
|---|---|---|
| signal | kv-cache | 12.5 |
| signal | queue | 10 |

Seed 0; model and limits: docs/simulator.md.
"""


def test_the_plans_markdown_becomes_headings_lists_tables_and_paragraphs() -> None:
    html = to_html(PLAN)
    assert "<h2>Autoscaling plan: acme/&lt;chat&gt;</h2>" in html
    assert "<h3>Recommended settings</h3>" in html
    assert ("<ul><li>Endpoint signal: <strong>queue depth</strong></li>"
            "<li>Minimum replicas: <strong>1</strong></li></ul>") in html
    assert '<th scope="col">layer</th>' in html and "<tr><td>signal</td><td>kv-cache</td><td>12.5</td></tr>" in html
    assert "<p>Traffic: 48 hours &lt;b&gt;simulated&lt;/b&gt;.</p>" in html  # text from data is never markup
    assert "**" not in html and "|---|" not in html and "# " not in html
