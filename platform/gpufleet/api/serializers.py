"""The base of every request-body serializer: the body must be what the OpenAPI document says, or a 400.

- Unknown fields are refused, by name. DRF drops keys a serializer does not declare; for an automation client
  that is dangerous: a typo (`nominal_quota` for `nominal`) or a field of a newer API version would "succeed"
  and change nothing.
- Types are strict, as the published document states them. DRF coerces: its IntegerField takes `"5"` and a
  fullwidth `"\\uff15"`, its BooleanField `"true"` and `1`, its CharField turns the number `5` into `"5"` and
  trims `" acme "` to `"acme"`; and many write fields are raw (JSONField) so the action, the one place the rule
  lives, names the reason ("must not be negative") — the actions also serve the CLI and portal forms, where
  every value is text, so they accept digit strings. Here each value's JSON type is checked against the field's
  OpenAPI type (`integer`: a JSON integer, not a bool, a float or a string; `number`; `string`; `boolean`;
  `array` and its items; `object`) before any field or action sees it, so the document and the rule cannot drift apart.
- Text is taken as sent, never trimmed: a single-line string (a name, region, URL, currency, date, display name)
  that starts or ends with whitespace is refused; only prose (`Prose` fields: reasons, comments, notes) keeps
  its spaces and line breaks.

Every write serializer derives from `StrictSerializer`, so these rules live in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

# How a reason names the type a field wants, and the type a value has ("must be a string, not a number").
EXPECTED = {"integer": "a whole number (a JSON integer)", "number": "a number", "string": "a string",
            "boolean": "true or false (a JSON boolean)", "array": "an array", "object": "an object"}
ACTUAL = {"integer": "a number", "number": "a number", "string": "a string", "boolean": "a boolean",
          "array": "an array", "object": "an object", "null": "null"}


def json_type_of(value: Any) -> str:
    """The JSON type name of a parsed JSON value, as JSON Schema spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _annotation(field: serializers.Field) -> Any:
    """The schema `documented()`/`extend_schema_field` attached to the field's class, if any."""
    from drf_spectacular.drainage import get_override

    return get_override(type(field), "field")


def field_schema(field: serializers.Field) -> dict[str, Any]:
    """The JSON type (and items) the OpenAPI document gives this write field; {} when it allows any JSON value."""
    annotation = _annotation(field)
    if isinstance(annotation, dict):
        return annotation
    if isinstance(annotation, serializers.Field):
        return field_schema(annotation)
    if isinstance(field, serializers.JSONField):
        return {}
    if isinstance(field, serializers.BooleanField):
        return {"type": "boolean"}
    if isinstance(field, serializers.IntegerField):
        return {"type": "integer"}
    if isinstance(field, serializers.FloatField):
        return {"type": "number"}
    if isinstance(field, serializers.MultipleChoiceField | serializers.ListField):
        child = getattr(field, "child", None)
        return {"type": "array", "items": field_schema(child) if child is not None else {}}
    if isinstance(field, serializers.ChoiceField):
        return {"type": "string"} if all(isinstance(c, str) for c in field.choices) else {}
    if isinstance(field, serializers.DictField | serializers.Serializer):
        return {"type": "object"}
    if isinstance(field, serializers.CharField | serializers.DateField | serializers.DateTimeField
                  | serializers.DecimalField | serializers.UUIDField):
        return {"type": "string"}
    return {}


def type_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why `value` is not of the JSON type `schema` states (None if it is, or the schema states none)."""
    expected = schema.get("type")
    actual = json_type_of(value)
    if value is None or not expected:  # null: DRF's allow_null says "may not be null" where it is not allowed
        return None
    fits = actual == expected or (expected == "number" and actual == "integer")
    if not fits:
        return f"must be {EXPECTED.get(expected, expected)}, not {ACTUAL.get(actual, actual)}"
    if expected == "array" and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            if (problem := type_problem(item, schema["items"])) is not None:
                return f"item {index} {problem}"
    return None


def edge_whitespace_problem(value: Any) -> str | None:
    if isinstance(value, str) and value != value.strip():
        return "must not start or end with whitespace (it is not trimmed)"
    return None


class RejectUnknownFields:
    """Mixin for any DRF serializer: keys that are not writable fields are reported by name, and every value
    must have the JSON type the OpenAPI document states for its field (see the module's docstring)."""

    unknown_reason = "is not a field of this request"

    def reason_for_unknown(self, name: str) -> str:
        return self.unknown_reason

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()  # type: ignore[misc]
        for field in fields.values():
            if isinstance(field, serializers.CharField):
                field.trim_whitespace = False  # taken as sent: edge whitespace is refused below, prose kept
        return fields  # type: ignore[no-any-return]

    def type_errors(self, data: Mapping[Any, Any]) -> dict[str, list[str]]:
        # A form-encoded body (QueryDict) carries only text: JSON types apply to JSON bodies; edges apply to both.
        typed = not isinstance(data, QueryDict)
        errors: dict[str, list[str]] = {}
        for name, field in self.fields.items():  # type: ignore[attr-defined]
            if field.read_only or name not in data:
                continue
            value = data[name]
            schema = field_schema(field)
            problem = type_problem(value, schema) if typed else None
            # Prose keeps its spaces; a name refuses whitespace anywhere, with its own reason (gpufleet.k8s_names).
            if problem is None and schema.get("type") == "string" and not getattr(field, "prose", False) \
                    and not getattr(field, "refuses_whitespace", False):
                problem = edge_whitespace_problem(value)
            if problem is not None:
                errors[name] = [problem]
        return errors

    def to_internal_value(self, data: Any) -> Any:
        refused: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}  # type: ignore[attr-defined]
            refused = {str(name): [self.reason_for_unknown(str(name))] for name in sorted(set(data) - writable,
                                                                                         key=str)}
            refused.update(self.type_errors(data))
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            # Every problem at once (a missing field too), but a refused value's reason is the type's, not what
            # a coercing field said about it.
            if refused and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **refused}) from exc
            raise
        if refused:
            raise serializers.ValidationError(refused)
        return value


class StrictSerializer(RejectUnknownFields, serializers.Serializer):
    pass


class StrictModelSerializer(RejectUnknownFields, serializers.ModelSerializer):
    pass


def documented(field_class: type[serializers.Field], schema: dict[str, Any] | serializers.Field,
               **kwargs: Any) -> serializers.Field:
    """A field whose OpenAPI schema is `schema` while its value is checked by the action.

    Many write fields stay raw (CharField/JSONField) so that the action, the one place the rule lives,
    reports the reason on the field ("must not be negative"). The published document must still say the
    exact type, enum and limits the action enforces; this attaches that schema. (A subclass, because DRF
    deep-copies declared fields by re-instantiating their class.) `schema` may be a field, e.g. a
    ChoiceField over a model's choices, so the enum is the same component as the model's.
    """
    from drf_spectacular.utils import extend_schema_field

    if kwargs.get("allow_null") and isinstance(schema, dict):
        schema = {**schema, "nullable": True}
    namespace: dict[str, Any] = {}
    if kwargs.pop("allow_blank", False):
        # Blank reaches the action (which says "is required"), but the schema does not offer "" as valid.
        def run_validation(self: Any, data: Any = serializers.empty) -> Any:
            return "" if data == "" else field_class.run_validation(self, data)

        namespace["run_validation"] = run_validation
    cls = type(f"Documented{field_class.__name__}", (field_class,), namespace)
    return extend_schema_field(schema)(cls)(**kwargs)  # type: ignore[no-any-return]


NO_BODY_REASON = "is not a field of this request (it takes no body)"


def refuse_body(data: Any) -> None:
    """A route that takes no body refuses one that has content, naming each key (an empty object is fine)."""
    if data is None or (isinstance(data, Mapping) and not data):
        return
    if isinstance(data, Mapping):
        raise serializers.ValidationError({str(key): [NO_BODY_REASON] for key in sorted(data, key=str)})
    raise serializers.ValidationError(["this request takes no body"])


def no_body(handler: Any) -> Any:
    """Marks a view method whose request has no body (`@extend_schema(request=None)`): the base view
    (gpufleet.api.viewsets) refuses a body there, as StrictSerializer refuses unknown fields elsewhere."""
    handler.takes_no_body = True
    return handler
