"""Styled 400/403/404/500 pages: the portal's own layout and words, never Django's bare or DEBUG pages."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from django.urls import reverse

from gpufleet.api.errors import server_error

STYLESHEET = "portal/portal.css"


def assert_styled(response, testid: str) -> None:  # type: ignore[no-untyped-def]
    body = response.content.decode()
    assert f'data-testid="{testid}"' in body, body[:500]
    assert STYLESHEET in body
    assert "URLconf" not in body and "Traceback" not in body


@pytest.mark.django_db
def test_another_teams_tenant_is_a_styled_404(alice_client, bob) -> None:
    from tests.support import factories

    factories.tenant("contractors", "untrusted", owner=bob)
    response = alice_client.get("/tenants/contractors/")
    assert response.status_code == 404
    assert_styled(response, "error-404")


@pytest.mark.django_db
def test_unknown_page_is_a_styled_404(alice_client) -> None:
    response = alice_client.get("/no-such-page/")
    assert response.status_code == 404
    assert_styled(response, "error-404")


@pytest.mark.django_db
def test_admin_page_for_a_non_admin_is_a_styled_403(alice_client) -> None:
    response = alice_client.get(reverse("portal:approvals"))
    assert response.status_code == 403
    assert_styled(response, "error-403")


def test_server_error_is_a_styled_500_without_a_database() -> None:
    # Django renders 500.html with no request context: the page must not need the user or a query.
    response = server_error(RequestFactory().get("/tenants/"))
    assert response.status_code == 500
    assert_styled(response, "error-500")


def test_api_paths_keep_problem_json() -> None:
    response = server_error(RequestFactory().get("/api/v1/tenants/"))
    assert response["Content-Type"].startswith("application/problem+json")


def test_demo_profile_does_not_serve_debug_pages() -> None:
    """The demo's DEBUG is off unless asked for: DEBUG 404s list every URL pattern to any signed-in user."""
    import importlib
    import os

    saved = os.environ.pop("DEBUG", None)
    try:
        demo = importlib.import_module("gpufleet.settings.demo")
        demo = importlib.reload(demo)
        assert demo.DEBUG is False
    finally:
        if saved is not None:
            os.environ["DEBUG"] = saved
