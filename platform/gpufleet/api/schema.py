"""OpenAPI extensions: the API token scheme (`Authorization: Bearer gpf_…`), so the published document
says how to authenticate, and generated clients send the header."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "gpufleet.accounts.tokens.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gpf_ API token"}
