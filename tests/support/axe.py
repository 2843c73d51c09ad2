"""axe-core accessibility checks in the browser tests.

axe-core comes from npm at test time (`npm ci --prefix tests/axe`, pinned by tests/axe/package-lock.json),
never committed. It is evaluated through the DevTools protocol, which the portal's Content-Security-Policy
(script-src 'self') does not apply to, so the pages are checked exactly as served.
"""

from __future__ import annotations

from typing import Any

from tests.support.services import REPO, missing

AXE = REPO / "tests" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
# WCAG 2.x A and AA rules; "best-practice" rules are reported too but only these impacts fail a test.
BLOCKING = {"serious", "critical"}


def axe_source() -> str:
    if not AXE.is_file():
        missing(f"axe-core is not installed at {AXE.relative_to(REPO)} (npm ci --prefix tests/axe)")
    return AXE.read_text(encoding="utf-8")


def violations(page: Any, source: str) -> list[dict[str, Any]]:
    """axe's serious and critical violations on the page as it is now: [{id, impact, help, targets}]."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(source)
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations'],"
        " runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}}))"
        ".violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " targets: v.nodes.slice(0, 5).map(n => n.target.join(' '))}))"
    )
    return [v for v in result if v["impact"] in BLOCKING]


def describe(found: list[dict[str, Any]]) -> str:
    return "; ".join(f"{v['id']} ({v['impact']}): {v['help']} at {', '.join(v['targets'])}" for v in found)
