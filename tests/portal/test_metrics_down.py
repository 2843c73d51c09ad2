"""Every page every role can reach, with the metrics source down: no raw exception text (urllib3's pool repr
names internal hosts), no template syntax shown as text, and a page that measures asks the source once, for
a short time, instead of retrying each query.

A Django-client crawl of the demo fleet (the browser crawl in test_crawl.py checks the same pages in Chromium
with axe; this one is fast enough to run on every change).
"""

from __future__ import annotations

import io
import re
import socket
import threading
import time
from collections.abc import Iterator
from html import unescape
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from django.test import Client

from tests.support import factories
from tests.support.clock import MID_NOVEMBER_2026, pinned

pytestmark = pytest.mark.django_db

ROLES = {"platform-admin": "root-admin", "billing-admin": "bill", "tenant-owner": "alice",
         "member": "mike", "viewer": "vera"}
NOT_CRAWLED = ("/api/", "/logout/", "/oidc/", "/static/", "/admin/", "/metrics", "/login/")
MAX_PAGES = 160
# What must never reach a person: exception reprs, tracebacks, addresses, template syntax.
RAW = re.compile(r"HTTPConnectionPool|HTTPSConnectionPool|Max retries exceeded|NewConnectionError|"
                 r"NameResolutionError|urllib3|Traceback|Errno|object at 0x|\{#|#\}|\{%|%\}|\{\{|\}\}")
HREF = re.compile(r'href="([^"]+)"')


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fleet(eager_tasks, gitops_repo, settings, monkeypatch) -> Iterator[str]:
    """The demo fleet, one user per role, and every metrics source pointing at a closed port."""
    from scheduling.clusters.models import Cluster
    from tenants import actions
    from tenants.models import Tenant

    down = f"http://127.0.0.1:{_closed_port()}"
    settings.GPUFLEET_METRICS_URL = down
    monkeypatch.setenv("GPUFLEET_METRICS_URL", down)
    with pinned(MID_NOVEMBER_2026):
        call_command("demo", stdout=io.StringIO())
        Cluster.objects.exclude(metrics_url="").update(metrics_url=down)
        factories.user("root-admin", roles={"platform-admin"})
        factories.user("bill", roles={"billing-admin"})
        factories.user("alice")
        vision = Tenant.objects.get(slug="vision")
        actions.add_member(vision, factories.user("mike"), "member")
        actions.add_member(vision, factories.user("vera"), "viewer")
        yield down


def crawl(client: Client) -> tuple[list[str], list[str]]:
    queue, seen, visited, problems = ["/"], set(), [], []
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        response = client.get(path)
        if response.status_code in (301, 302):
            queue.append(response["Location"])
            continue
        if response.status_code >= 400 and response.status_code != 403:
            problems.append(f"{path}: HTTP {response.status_code}")
        if "text/html" not in response.get("Content-Type", ""):
            continue
        visited.append(path)
        html = response.content.decode()
        text = unescape(re.sub(r"<script.*?</script>|<style.*?</style>|<[^>]+>", " ", html, flags=re.S))
        if found := RAW.search(text):
            problems.append(f"{path}: shows {found.group(0)!r}: …{text[max(0, found.start() - 80):found.end() + 80]}…")
        for href in HREF.findall(html):
            url = urlsplit(urljoin("http://testserver" + path, unescape(href)))
            if url.netloc != "testserver" or url.path.startswith(NOT_CRAWLED):
                continue
            target = url.path + (f"?{url.query}" if url.query else "")
            if target not in seen:
                queue.append(target)
    return visited, problems


@pytest.mark.parametrize("role", list(ROLES))
def test_no_page_shows_raw_errors_or_template_syntax_with_metrics_down(fleet, role: str) -> None:
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(username=ROLES[role]))
    with pinned(MID_NOVEMBER_2026):
        visited, problems = crawl(client)
    assert not problems, "\n".join(problems)
    assert len(visited) > 10, visited  # the crawl went through the portal
    if role == "platform-admin":
        assert {"/fleet/", "/gpu/queue/"} <= set(visited)


def test_pages_that_measure_say_plainly_that_the_source_is_down(fleet: str) -> None:
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    admin, alice = Client(), Client()
    admin.force_login(users.get(username="root-admin"))
    alice.force_login(users.get(username="alice"))
    with pinned(MID_NOVEMBER_2026):
        pages = {"/fleet/": admin, "/gpu/queue/": admin, "/fleet/tenants/vision/": alice, "/gpu/node-health/": admin}
        for path, client in pages.items():
            html = client.get(path).content.decode()
            assert 'data-testid="metrics-outage"' in html, path
            assert "Metrics source not reachable: platform metrics" in html, path
            assert "connection refused" in html, path
            assert fleet.split("//")[1] not in html, path  # no address
            assert ("metrics-setting" in html) == (client is admin), path  # admins get the setting's page


@pytest.fixture
def black_hole(settings, monkeypatch) -> Iterator[list[socket.socket]]:
    """A metrics source that accepts connections and never answers; yields the connection count."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings.GPUFLEET_METRICS_URL = url
    monkeypatch.setenv("GPUFLEET_METRICS_URL", url)
    yield accepted
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_silent_source_costs_a_page_one_short_wait(black_hole, admin_user, eager_tasks, gitops_repo) -> None:
    """The queue view of four clusters sharing one silent source: one probe of a second, not 4 x retries x 120 s.
    The next page remembers the answer and does not wait at all."""
    from scheduling.clusters.models import Cluster

    with pinned(MID_NOVEMBER_2026):
        call_command("demo", stdout=io.StringIO())
        Cluster.objects.update(metrics_url="")
        assert Cluster.objects.count() >= 2
        client = Client()
        client.force_login(admin_user)
        started = time.monotonic()
        html = client.get("/gpu/queue/").content.decode()
        first = time.monotonic() - started
        started = time.monotonic()
        client.get("/fleet/")
        second = time.monotonic() - started
    assert "Metrics source not reachable: platform metrics (GPUFLEET_METRICS_URL) (timed out)" in html
    # One connection: one probe for all clusters, not a query (and its retries) per cluster. The times are
    # loose (a shared, busy machine); before, each query waited its 120 s read timeout twice.
    assert len(black_hole) == 1, len(black_hole)
    assert first < 8, first
    assert second < 5, second
