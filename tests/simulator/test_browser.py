"""The Simulate page in a real browser (Debian's headless Chromium via Playwright): an admin finds it in
the navigation, runs a preset, and reads the comparison charts and both variants; a tenant owner has no
such link."""

from __future__ import annotations

import pytest

from scheduling.models import SimulationRun
from tests.support import factories
from tests.support.browser import browser_page, sign_in, sign_out

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]


def test_admin_runs_a_preset_in_a_real_browser(live_server, eager_tasks) -> None:
    factories.user("root-admin", roles={"platform-admin"})
    owner = factories.user("lead")
    factories.tenant("vision", owner=owner, phase="ready")
    seen: dict[str, object] = {}
    with browser_page() as page:
        sign_in(page, live_server.url, "lead")
        seen["owner_links"] = page.get_by_role("link", name="Simulate").count()
        sign_out(page)
        sign_in(page, live_server.url, "root-admin")
        page.get_by_role("link", name="Simulate").click()
        page.select_option("#id_preset", "seven-of-eight")
        page.fill("#id_seed", "1")
        page.fill("#id_days", "0.25")
        page.get_by_role("button", name="Run").click()
        page.wait_for_selector("[data-testid=charts]")
        seen["charts"] = page.locator("[data-testid=charts] svg").count()
        seen["pod"] = page.locator("[data-testid=variant-pod-by-pod]").inner_text()
        seen["gang"] = page.locator("[data-testid=variant-gang]").inner_text()
        seen["state"] = page.locator("[data-testid=state]").inner_text()
    assert seen["owner_links"] == 0
    assert seen["state"] == "done" and seen["charts"] >= 3
    assert "partial gangs" in str(seen["pod"]) and "(partial gangs 0.0)" in str(seen["gang"])
    assert SimulationRun.objects.get().created_by.username == "root-admin"
