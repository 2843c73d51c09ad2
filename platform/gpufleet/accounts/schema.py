"""OpenAPI: API tokens are an HTTP bearer scheme (drf-spectacular extension, registered on import)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "gpufleet.accounts.tokens.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gpf_… (an API token from /tokens/)"}
