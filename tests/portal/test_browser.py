"""End to end in a real browser (Debian's headless Chromium driven by Playwright's sync API).

A user signs in with a password (the test profile allows it), requests a tenant (first with a bad
slug, fixed after reading the error), signs out; a platform admin signs in, approves it from the
approvals queue and sees it `ready`, its objects listed; the requester then sees it ready too, and
creates an API token whose secret is shown once.

The browser runs in the test thread against pytest-django's `live_server` (another thread), so the
database is set up before Playwright starts and checked after it stops: Playwright's sync API keeps
an asyncio loop running in this thread, inside which Django refuses ORM calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.accounts.models import ApiToken, hash_secret
from infra.gitops.git import Git
from tenants.models import Phase, Tenant
from tests.support import factories
from tests.support.browser import browser_page, sign_in, sign_out

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]


def test_request_approve_ready_in_a_real_browser(
    live_server, eager_tasks, gitops_repo: Path, tmp_path: Path
) -> None:
    factories.user("alice")
    factories.user("root-admin", roles={"platform-admin"})
    base = live_server.url
    shots = tmp_path / "screenshots"
    shots.mkdir()
    seen: dict[str, str] = {}

    with browser_page() as page:

        # Anonymous: the portal sends us to sign in.
        page.goto(f"{base}/")
        assert "/login/" in page.url
        page.screenshot(path=str(shots / "0-sign-in.png"), full_page=True)

        sign_in(page, base, "alice")
        page.get_by_role("link", name="Request a tenant").first.click()
        page.fill("#id_slug", "Vision_Lab")
        page.fill("#id_display_name", "Vision lab")
        page.select_option("#id_trust_level", "standard")
        page.get_by_role("button", name="Request tenant").click()
        seen["slug error"] = page.inner_text("[data-field=slug]")
        page.screenshot(path=str(shots / "1-request-error.png"), full_page=True)

        page.fill("#id_slug", "vision-lab")
        page.get_by_role("button", name="Request tenant").click()
        page.wait_for_url(f"{base}/tenants/vision-lab/")
        seen["requested phase"] = page.inner_text("[data-testid=phase]")
        sign_out(page)

        sign_in(page, base, "root-admin")
        page.get_by_role("link", name="Approvals").click()
        page.screenshot(path=str(shots / "2-approvals.png"), full_page=True)
        page.get_by_role("button", name="Approve vision-lab").click()
        page.wait_for_selector(".flash-success")
        seen["flash"] = page.inner_text(".flash")
        page.get_by_role("link", name="Tenants", exact=True).click()
        page.get_by_role("link", name="vision-lab").click()
        page.wait_for_url(f"{base}/tenants/vision-lab/")
        seen["admin phase"] = page.inner_text("[data-testid=phase]")
        seen["liveness"] = page.inner_text("[data-testid=liveness]")
        seen["objects"] = page.inner_text("[data-testid=owned-objects]")
        page.screenshot(path=str(shots / "3-tenant-ready.png"), full_page=True)
        sign_out(page)

        sign_in(page, base, "alice")
        seen["alice home"] = page.inner_text("[data-testid=tenant-overview]")
        page.get_by_role("link", name="Tenants", exact=True).click()
        seen["alice list"] = page.inner_text("[data-testid=tenant-list]")
        page.screenshot(path=str(shots / "4-my-tenants.png"), full_page=True)

        # An API token: the secret is on the page once, and gone after a reload.
        page.get_by_role("link", name="API tokens").click()
        page.fill("#id_name", "laptop")
        page.get_by_role("button", name="Create token").click()
        seen["token"] = page.input_value("[data-testid=new-token] input")
        page.screenshot(path=str(shots / "5-token-once.png"), full_page=True)
        page.reload()
        seen["tokens after reload"] = page.content()

    assert "lowercase" in seen["slug error"], seen["slug error"]
    assert seen["requested phase"] == "requested"
    assert "approved" in seen["flash"]
    assert seen["admin phase"] == "ready", seen
    assert "Your latest change is live" in seen["liveness"]
    assert "tenant-vision-lab" in seen["objects"] and "HelmRelease" in seen["objects"]
    assert "vision-lab" in seen["alice list"] and "ready" in seen["alice list"]
    assert "Vision lab" in seen["alice home"] and "ready" in seen["alice home"]

    tenant = Tenant.objects.get(slug="vision-lab")
    assert tenant.phase == Phase.READY and tenant.observed_generation == tenant.generation
    assert not Tenant.objects.filter(slug="Vision_Lab").exists()
    assert (gitops_repo / "clusters/default/tenants" / "vision-lab" / "namespace.core_tenant-vision-lab.yaml").is_file()
    log = Git(gitops_repo).run("log", "--format=%s")
    assert "tenant vision-lab: reconcile generation 1" in log
    token = ApiToken.objects.get(user__username="alice")
    assert seen["token"].startswith(token.prefix) and token.digest == hash_secret(seen["token"])
    assert seen["token"] not in seen["tokens after reload"]
    for name in ("0-sign-in.png", "1-request-error.png", "2-approvals.png", "3-tenant-ready.png",
                 "4-my-tenants.png", "5-token-once.png"):
        assert (shots / name).stat().st_size > 10_000, f"{name} looks empty"
