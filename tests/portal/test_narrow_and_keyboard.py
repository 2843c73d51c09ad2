"""The portal on a 390 px phone screen, and by keyboard alone (real Chromium).

At 390 px: the page never scrolls sideways, every navigation link is whole and inside the screen (nothing
cut off, e.g. "API tokens"), and wide tables scroll inside their own card (and take a tab stop so keyboard
users can scroll them). By keyboard: sign in, skip the navigation, request a tenant and read its error,
without touching the mouse.
"""

from __future__ import annotations

import pytest

from tests.support import factories
from tests.support.browser import PASSWORD, browser_page, sign_in
from tests.support.clock import MID_NOVEMBER_2026, pinned

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
NARROW_PAGES = ["/", "/tenants/", "/tenants/acme/", "/gpu/flavors/", "/gpu/tenants/acme/", "/billing/invoices/",
                "/tokens/", "/tenants/new/", "/approvals/"]

LAYOUT = """() => {
  const vw = document.documentElement.clientWidth;
  const nav = [...document.querySelectorAll('.mainnav a')].map(a => {
    const r = a.getBoundingClientRect();
    return {text: a.textContent.trim(), left: r.left, right: r.right, whole: a.scrollWidth <= a.clientWidth + 1};
  });
  const tables = [...document.querySelectorAll('table')].map(t => {
    const box = (t.closest('.card') || document.querySelector('main')).getBoundingClientRect();
    const r = t.getBoundingClientRect();
    return {id: t.dataset.testid || '', right: r.right, boxRight: box.right + 1,
            scrolls: t.scrollWidth > t.clientWidth + 1, tabindex: t.getAttribute('tabindex')};
  });
  return {vw, pageWidth: document.documentElement.scrollWidth, nav, tables};
}"""


@pytest.fixture
def world(db):
    alice = factories.user("alice")
    factories.user("root-admin", roles={"platform-admin"})
    factories.tenant("acme", "standard", owner=alice, phase="ready")
    return alice


def test_every_main_page_fits_a_390px_screen(world, live_server) -> None:
    found = {}
    with browser_page() as page:
        page.set_viewport_size(PHONE)
        sign_in(page, live_server.url, "root-admin")
        for path in NARROW_PAGES:
            page.goto(live_server.url + path)
            found[path] = page.evaluate(LAYOUT)

    for path, layout in found.items():
        assert layout["pageWidth"] <= layout["vw"], f"{path} scrolls sideways: {layout['pageWidth']} px"
        names = [link["text"] for link in layout["nav"]]
        assert "API tokens" in names and "Approvals" in names, names
        for link in layout["nav"]:
            assert 0 <= link["left"] and link["right"] <= layout["vw"] and link["whole"], (path, link)
        for table in layout["tables"]:
            assert table["right"] <= table["boxRight"], f"{path}: table {table['id']} overflows its card"
            if table["scrolls"]:
                assert table["tabindex"] == "0", f"{path}: table {table['id']} scrolls but is not focusable"


def test_sign_in_and_request_a_tenant_by_keyboard_alone(world, live_server) -> None:
    with browser_page() as page:
        page.goto(live_server.url + "/login/")
        page.focus("#id_username")
        page.keyboard.type("alice")
        page.keyboard.press("Tab")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_selector("[data-testid=signed-in-user]")

        # The first Tab lands on "Skip to content", which moves focus past the navigation.
        page.keyboard.press("Tab")
        skip = page.evaluate("() => document.activeElement.textContent.trim()")
        page.keyboard.press("Enter")
        after_skip = page.evaluate("() => document.activeElement.id")

        # Tab through the navigation to "Tenants", open it, then its "Request a tenant" button.
        page.goto(live_server.url + "/")
        stops = []
        for _ in range(12):
            page.keyboard.press("Tab")
            stops.append(page.evaluate("() => document.activeElement.textContent.trim()"))
            if stops[-1] == "Tenants":
                break
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/tenants/")
        page.get_by_role("link", name="Request a tenant").focus()
        page.keyboard.press("Enter")
        page.wait_for_url(f"{live_server.url}/tenants/new/")

        page.focus("#id_slug")
        page.keyboard.type("Speech Lab!")
        page.keyboard.press("Tab")  # display name
        page.keyboard.type("Speech lab")
        page.keyboard.press("Tab")  # trust level
        page.keyboard.press("ArrowDown")  # the first real choice
        page.keyboard.press("Tab")  # the submit button
        submit = page.evaluate("() => document.activeElement.textContent.trim()")
        page.keyboard.press("Enter")
        page.wait_for_selector("[data-field=slug]")
        errors = page.inner_text("[data-field=slug]")
        described = page.get_attribute("#id_slug", "aria-describedby") or ""
        invalid = page.get_attribute("#id_slug", "aria-invalid")

    assert skip == "Skip to content" and after_skip == "main"
    assert submit == "Request tenant"
    assert "Tenants" in stops, stops
    # Every rule "Speech Lab!" breaks, next to the slug field, and announced with it.
    for rule in ("whitespace", "lowercase", "'!'"):
        assert rule in errors, errors
    assert "id_slug_errors" in described and invalid == "true"


def test_usage_chart_fills_its_card(world, live_server) -> None:
    from tests.billing.helpers import catalog, hour, hours, sample, usage

    flavors = catalog()
    with pinned(MID_NOVEMBER_2026):
        usage(hour(2026, 10, 1), hour(2026, 11, 1),
              [sample("acme", flavors["a100"], at, "3600") for at in hours(hour(2026, 10, 2, 0), 48)])
    with pinned(MID_NOVEMBER_2026), browser_page() as page:
        sign_in(page, live_server.url, "alice")
        page.goto(live_server.url + "/billing/usage/acme/?period=2026-10")
        widths = page.evaluate("""() => {
          const card = document.querySelector('[data-testid=usage-chart]');
          const style = getComputedStyle(card);
          const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          return {svg: card.querySelector('svg').getBoundingClientRect().width, inner};
        }""")
    assert widths["svg"] >= 0.98 * widths["inner"], widths
