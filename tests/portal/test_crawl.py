"""Every page every role can reach, in a real browser: no error status the role should not get, no link into
the API, no console error (a CSP violation is one), no serious or critical axe-core violation.

The crawler starts at the home page and follows same-origin links only (never /api/, sign-out, the Django
admin or static files; destructive actions are POST forms, which a crawler never submits), so pages added
later are checked without touching this test. Each page is saved as a full-page screenshot under
tmp/artifacts/portal-crawl/<role>/ (GPUFLEET_ARTIFACTS_DIR moves it); with GPUFLEET_UPDATE_SCREENSHOTS=1 the
README's pictures in docs/screenshots/ are refreshed from the same run.

The fleet is the demo's (call_command("demo")) with the clock pinned to mid-November 2026: October is
invoiced (drafts), November has usage so far.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command

from tests.portal.test_metrics_down import RAW, _closed_port
from tests.support import factories
from tests.support.axe import axe_source, describe, violations
from tests.support.browser import PASSWORD, browser_page, sign_in
from tests.support.clock import MID_NOVEMBER_2026, pinned
from tests.support.services import REPO

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]

# role -> the user the crawl signs in as (created by the `fleet` fixture below).
ROLES = {
    "platform-admin": "root-admin",
    "billing-admin": "bill",
    "tenant-owner": "alice",
    "member": "mike",
    "viewer": "vera",
}
NOT_CRAWLED = ("/api/", "/logout/", "/oidc/", "/static/", "/admin/", "/metrics", "/login/")
MAX_PAGES = 120
ARTIFACTS = Path(os.environ.get("GPUFLEET_ARTIFACTS_DIR", REPO / "tmp" / "artifacts")) / "portal-crawl"
SCREENSHOTS = REPO / "docs" / "screenshots"
# README pictures: (role, path pattern, file name) — the first crawled page matching is saved.
README_SHOTS = [
    ("platform-admin", r"^/$", "admin-home.png"),
    ("tenant-owner", r"^/$", "tenant-home.png"),
    ("tenant-owner", r"^/billing/invoices/\d+/$", "invoice.png"),
    ("tenant-owner", r"^/billing/usage/vision/$", "usage.png"),
]


@pytest.fixture
def fleet(eager_tasks, gitops_repo, settings, monkeypatch) -> Iterator[None]:
    """The demo fleet plus one user per role (tenant roles on tenant `vision`), with the metrics source down
    (a closed local port): every page must say so plainly (no exception text, no internal address)."""
    from tenants import actions
    from tenants.models import Tenant

    down = f"http://127.0.0.1:{_closed_port()}"
    settings.GPUFLEET_METRICS_URL = down
    monkeypatch.setenv("GPUFLEET_METRICS_URL", down)
    with pinned(MID_NOVEMBER_2026):
        call_command("demo", stdout=io.StringIO())
        factories.user("root-admin", roles={"platform-admin"})
        factories.user("bill", roles={"billing-admin"})
        alice = factories.user("alice")  # the demo's owner of vision and nlp-inference
        alice.set_password(PASSWORD)
        alice.save()
        vision = Tenant.objects.get(slug="vision")
        actions.add_member(vision, factories.user("mike"), "member")
        actions.add_member(vision, factories.user("vera"), "viewer")
        yield


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "home"


def crawl(page: Any, base: str, role: str, axe: str) -> dict[str, Any]:
    """Visit every page reachable by links from the home page; collect what is wrong on each."""
    shots = ARTIFACTS / role
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    refreshed: set[str] = set()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: console.append(str(exc)))
    origin = urlsplit(base).netloc
    queue, seen, problems, visited, charted = ["/"], set(), [], [], []
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        response = page.request.get(base + path)
        kind = response.headers.get("content-type", "")
        if response.status >= 400:
            problems.append(f"{path}: HTTP {response.status}")
        if "text/html" not in kind:
            continue  # a download (CSV, JSON, kubeconfig): its status is checked, nothing to render
        console.clear()
        page.goto(base + path, wait_until="load")
        visited.append(path)
        page.screenshot(path=str(shots / f"{len(visited):03d}-{_slug(path)}.png"), full_page=True)
        for name in [shot for r, pattern, shot in README_SHOTS if r == role and re.search(pattern, path)]:
            if os.environ.get("GPUFLEET_UPDATE_SCREENSHOTS") and name not in refreshed:
                refreshed.add(name)
                SCREENSHOTS.mkdir(exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / name), full_page=False)
        if console:
            problems.append(f"{path}: console errors {console[:3]}")
        if raw := RAW.search(page.inner_text("body")):
            problems.append(f"{path}: shows {raw.group(0)!r} (raw exception text or template syntax)")
        if found := violations(page, axe):
            problems.append(f"{path}: axe {describe(found)}")
        if page.locator("svg.chart").count():
            charted.append(path)
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
            url = urlsplit(urljoin(base + path, href))
            if url.netloc != origin or url.scheme not in ("http", "https"):
                continue
            if url.path.startswith("/api/"):
                problems.append(f"{path}: links into the API ({href})")
                continue
            target = url.path + (f"?{url.query}" if url.query else "")
            if not url.path.startswith(NOT_CRAWLED) and target not in seen:
                queue.append(target)
    return {"visited": visited, "problems": problems, "left": queue, "charted": charted}


# At 390 px (a phone): every chart is drawn, named, and inside the screen; the page does not scroll sideways.
CHARTS_AT_390 = """() => {
  const vw = document.documentElement.clientWidth;
  return {vw, pageWidth: document.documentElement.scrollWidth,
          charts: [...document.querySelectorAll('svg.chart')].map(svg => {
            const r = svg.getBoundingClientRect();
            return {id: svg.dataset.testid, left: r.left, right: r.right, height: r.height,
                    named: !!svg.querySelector('title') && svg.getAttribute('role') === 'img'};
          })};
}"""


def charts_at_390(page: Any, base: str, paths: list[str]) -> list[str]:
    page.set_viewport_size({"width": 390, "height": 844})
    problems = []
    for path in paths:
        page.goto(base + path, wait_until="load")
        layout = page.evaluate(CHARTS_AT_390)
        if layout["pageWidth"] > layout["vw"]:
            problems.append(f"{path} at 390 px scrolls sideways ({layout['pageWidth']} px)")
        for chart in layout["charts"]:
            if chart["left"] < 0 or chart["right"] > layout["vw"] or chart["height"] < 100 or not chart["named"]:
                problems.append(f"{path} at 390 px: chart {chart}")
    return problems


@pytest.mark.parametrize("role", list(ROLES))
def test_every_reachable_page_is_clean_for_each_role(fleet, live_server, role: str) -> None:
    axe = axe_source()
    with pinned(MID_NOVEMBER_2026), browser_page(timeout_ms=60_000) as page:
        sign_in(page, live_server.url, ROLES[role])
        result = crawl(page, live_server.url, role, axe)
        result["problems"] += charts_at_390(page, live_server.url, result["charted"])

    visited = result["visited"]
    assert not result["problems"], "\n".join(result["problems"])
    assert not result["left"], f"more than {MAX_PAGES} pages; raise MAX_PAGES or bound the links"
    # The crawl really went through the portal (a broken nav would "pass" by visiting one page).
    must_reach = {"/", "/tenants/", "/gpu/flavors/", "/billing/invoices/", "/tokens/", "/tenants/new/"}
    if role in ("tenant-owner", "member", "viewer"):
        must_reach |= {"/tenants/vision/", "/gpu/tenants/vision/", "/billing/usage/vision/",
                       "/tenants/vision/isolation/"}
    if role == "platform-admin":
        must_reach |= {"/approvals/", "/gpu/requests/", "/gpu/simulate/"}
    if role in ("tenant-owner", "billing-admin"):
        assert any(re.fullmatch(r"/billing/invoices/\d+/", p) for p in visited), visited
    if role == "billing-admin":
        must_reach |= {"/billing/exports/", "/billing/reconciliation/"}
    assert must_reach <= set(visited), sorted(must_reach - set(visited))
    if role in ("member", "viewer"):
        assert not any(p.startswith("/approvals/") for p in visited)
    # Charts where people look (issue 28): spend on the admins' overview, allocation on the fleet page,
    # quota vs use on a tenant's utilisation page; each checked at 390 px above.
    if role == "platform-admin":
        assert {"/", "/fleet/"} <= set(result["charted"]), result["charted"]
    if role == "tenant-owner":
        assert "/fleet/tenants/vision/" in result["charted"], result["charted"]
    shots = list((ARTIFACTS / role).glob("*.png"))
    assert len(shots) >= len(visited) and all(s.stat().st_size > 5_000 for s in shots)
