"""OpenAPI extensions: the API token scheme (`Authorization: Bearer gpf_…`), so the published document
says how to authenticate, and generated clients send the header."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "gpufleet.accounts.tokens.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gpf_ API token"}


PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details; `fields`, `error` and `errors` are extension members.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "error": {"type": "string"},
        "errors": {"type": "array", "items": {
            "type": "object", "properties": {"field": {"type": "string"}, "reason": {"type": "string"}},
            "required": ["field", "reason"]}},
    },
    "required": ["type", "title", "status", "detail", "error", "errors"],
}


def declare_problems(result, generator, request, public):  # type: ignore[no-untyped-def]
    """Post-processing hook: every operation declares its 4XX/5XX answers as problem+json, so clients and
    the contract test know (and check) the error shape too."""
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    problem = {"content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            responses.setdefault("4XX", {**problem, "description": "Client error (problem details)"})
            responses.setdefault("5XX", {**problem, "description": "Server or dependency error (problem details)"})
    return result
