"""One headless Chromium page for the end-to-end browser tests (Debian's Chromium, Playwright's sync API).

Open the page only after the test's rows exist and read the database only after it is closed:
Playwright's sync API keeps an asyncio loop running in the test thread, inside which Django refuses
ORM calls. The server side is pytest-django's `live_server` (another thread).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.services import missing

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
# The password tests.support.factories.user gives every user.
PASSWORD = "pw-for-tests"


@contextmanager
def browser_page(timeout_ms: int = 20_000) -> Iterator[Any]:
    """A fresh 1280x900 page; `missing(...)` when Chromium or Playwright is not installed."""
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"Chromium is not installed at {CHROMIUM} (Debian package `chromium`)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("PyPI `playwright` is not installed (the test extra)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            browser.close()


def sign_in(page: Any, base: str, username: str) -> None:
    """Password sign-in (the test profile allows it); returns once the header names the user."""
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_selector(f"[data-testid=signed-in-user]:text-is('{username}')")


def sign_out(page: Any) -> None:
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("#id_username")
