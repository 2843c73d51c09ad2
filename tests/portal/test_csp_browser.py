"""The portal works under its Content-Security-Policy: in headless Chromium, the main pages raise no
CSP violation (console or `securitypolicyviolation` event) and no script error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from billing import actions as billing_actions
from scheduling import actions as scheduling_actions
from tenants.models import Phase
from tests.support import factories
from tests.support.browser import browser_page, sign_in

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]

PAGES = [
    "/", "/tenants/new/", "/tenants/acme/", "/approvals/", "/tokens/",
    "/gpu/flavors/", "/gpu/tenants/acme/", "/gpu/requests/",
    "/billing/invoices/", "/billing/usage/acme/", "/billing/reconciliation/", "/billing/exports/",
    "/admin/", "/admin/billing/invoice/", "/admin/billing/price/",
]
# Runs in the page before its own scripts (Playwright injects it outside the page's CSP).
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(
  e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber));
"""


def test_main_pages_raise_no_csp_violation(live_server, settings, gitops_repo: Path) -> None:
    settings.GPUFLEET_METRICS_URL = "http://127.0.0.1:9"  # nothing listens: pages must not need it
    admin = factories.user("root-admin", roles={"platform-admin", "billing-admin"})
    admin.is_staff = admin.is_superuser = True
    admin.save()
    model = scheduling_actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    scheduling_actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
    factories.tenant("acme", "trusted", owner=admin, phase=Phase.READY)
    factories.tenant("newbie", "standard")
    billing_actions.set_price("h100", "2.50", "USD", "2026-01-01")
    base = live_server.url
    problems: list[str] = []
    visited: dict[str, int] = {}

    with browser_page() as page:
        page.add_init_script(RECORD_VIOLATIONS)

        def on_console(message: Any) -> None:
            if "Content Security Policy" in message.text:
                problems.append(f"{page.url}: console {message.type}: {message.text}")

        page.on("console", on_console)
        page.on("pageerror", lambda error: problems.append(f"{page.url}: script error: {error}"))
        sign_in(page, base, "root-admin")
        for path in PAGES:
            response = page.goto(f"{base}{path}")
            visited[path] = response.status if response else 0
            page.wait_for_load_state("load")
            problems.extend(f"{path}: {v}" for v in page.evaluate("window.__csp"))
        header = page.goto(f"{base}/").headers.get("content-security-policy", "")

    assert {p: s for p, s in visited.items() if s != 200} == {}
    assert problems == [], "\n".join(problems)
    assert "script-src 'self'" in header
