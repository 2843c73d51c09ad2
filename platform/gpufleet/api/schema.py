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


def close_request_bodies(result, generator, request, public):  # type: ignore[no-untyped-def]
    """Post-processing hook: every request body refuses fields it does not list (StrictSerializer does), so its
    component says `additionalProperties: false` — clients and the contract test's negative cases know it.
    Only components used as request bodies alone: a shared one (a token's, whose answer adds `token`) would
    then describe the answers wrongly."""
    def refs(node, out):  # type: ignore[no-untyped-def]
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                out.add(node["$ref"].rsplit("/", 1)[-1])
            for value in node.values():
                refs(value, out)
        elif isinstance(node, list):
            for value in node:
                refs(value, out)
        return out

    schemas = result.get("components", {}).get("schemas", {})

    def closure(names):  # type: ignore[no-untyped-def]
        todo, seen = list(names), set()
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(refs(schemas.get(name, {}), set()))
        return seen

    requests_, answers = set(), set()
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                refs(operation.get("requestBody", {}), requests_)
                refs(operation.get("responses", {}), answers)
    requests_, answers = closure(requests_), closure(answers)
    for name in sorted(requests_ - answers):
        if schemas.get(name, {}).get("type") == "object":
            schemas[name]["additionalProperties"] = False
    return result
