"""The OpenAPI document is for signed-in callers only (docs/api.md); every page carries the CSP header."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.support import factories

pytestmark = pytest.mark.django_db


def test_openapi_schema_only_for_authenticated_callers() -> None:
    anonymous = APIClient().get("/api/v1/schema/")
    assert anonymous.status_code in (401, 403), anonymous.status_code
    client = APIClient()
    client.force_authenticate(factories.user("alice"))
    signed_in = client.get("/api/v1/schema/")
    assert signed_in.status_code == 200
    assert b"openapi:" in signed_in.content
    assert b"apiToken" in signed_in.content  # API tokens are declared as the bearer scheme they are


@pytest.mark.parametrize("path", ["/login/", "/api/v1/tenants/"])
def test_every_response_carries_the_content_security_policy(client, path: str) -> None:
    policy = client.get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
