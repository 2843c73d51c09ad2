"""The quota review flow end to end in a real browser (Debian's headless Chromium via Playwright).

A tenant owner opens the tenant's GPU page, proposes a quota that does not fit (reads the error),
then one that does, and reads the preview (rendered diff + capacity check). A platform admin opens
the request and approves it with a comment. Afterwards: the quota is written, and the GitOps main
branch has exactly one new commit touching only that tenant's files.

Database rows are prepared before Playwright starts and checked after it stops (Playwright's sync API
runs an asyncio loop in this thread, inside which Django refuses ORM calls).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling import actions
from scheduling.models import Quota, QuotaChangeRequest
from tenants import reconcile
from tests.gitops.helpers import git
from tests.support import factories
from tests.support.browser import browser_page, sign_in, sign_out

pytestmark = [pytest.mark.service, pytest.mark.django_db(transaction=True)]


def test_quota_request_reviewed_in_a_real_browser(live_server, eager_tasks, gitops_repo: Path,
                                                   tmp_path: Path) -> None:
    model = actions.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920)
    actions.create_flavor("a100", gpu_model=model.name, mode="whole", capacity=8)
    owner = factories.user("lead")
    factories.user("root-admin", roles={"platform-admin"})
    tenant = factories.tenant("vision", "standard", owner=owner, phase="approved")
    reconcile.reconcile_tenant(tenant.pk)
    head = git(gitops_repo, "rev-parse", "main").strip()
    base = live_server.url
    shots = tmp_path / "screenshots"
    shots.mkdir()
    seen: dict[str, str] = {}

    with browser_page() as page:
        sign_in(page, base, "lead")
        page.get_by_role("link", name="GPU flavors").click()
        page.get_by_role("link", name="vision").click()
        page.select_option("#id_flavor", "a100")
        page.fill("#id_nominal", "12")
        page.get_by_role("button", name="Propose for review").click()
        seen["error"] = page.locator("form[data-testid=quota-request-form]").inner_text()
        page.screenshot(path=str(shots / "1-over-capacity.png"), full_page=True)
        page.fill("#id_nominal", "4")
        page.fill("#id_borrowing_limit", "2")
        page.fill("#id_reason", "fine-tuning run")
        page.get_by_role("button", name="Propose for review").click()
        page.wait_for_selector("[data-testid=preview]")
        seen["preview"] = page.locator("[data-testid=preview]").inner_text()
        seen["capacity"] = page.locator("[data-testid=capacity]").inner_text()
        seen["owner_can_review"] = str(page.locator("[data-testid=approve]").count())
        seen["request_url"] = page.url
        page.screenshot(path=str(shots / "2-preview.png"), full_page=True)
        sign_out(page)

        sign_in(page, base, "root-admin")
        page.goto(seen["request_url"])
        page.fill("#id_comment", "approved for Q3")
        page.get_by_role("button", name="Approve").click()
        page.wait_for_selector("[data-testid=state]:text-is('approved')")
        seen["after"] = page.locator("main").inner_text()
        page.screenshot(path=str(shots / "3-approved.png"), full_page=True)

    assert "over capacity" in seen["error"]
    assert "nominalQuota: 4" in seen["preview"] and "borrowingLimit: 2" in seen["preview"]
    assert "ClusterQueue.kueue.x-k8s.io/-/tenant-vision" in seen["preview"]
    assert "fits (4 left)" in seen["capacity"]
    assert seen["owner_can_review"] == "0"
    assert "approved for Q3" in seen["after"] and "merged as" in seen["after"]
    change = QuotaChangeRequest.objects.get()
    assert change.state == "approved" and change.reviewed_by.username == "root-admin"
    assert Quota.objects.get(tenant=tenant).nominal == 4
    commits = git(gitops_repo, "rev-list", f"{head}..main").split()
    assert commits == [change.revision]
    touched = git(gitops_repo, "diff", "--name-only", head, "main").split()
    assert touched and all(path.startswith("clusters/default/tenants/vision/") for path in touched)
