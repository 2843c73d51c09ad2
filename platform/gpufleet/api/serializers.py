"""The base of every request-body serializer: unknown fields are a 400, not silently ignored.

DRF drops keys a serializer does not declare. For an automation client that is dangerous: a typo
(`nominal_quota` for `nominal`) or a field of a newer API version would "succeed" and change nothing.
Every write serializer derives from `StrictSerializer`, so the rule lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class RejectUnknownFields:
    """Mixin for any DRF serializer: keys that are not writable fields are reported by name."""

    unknown_reason = "is not a field of this request"

    def reason_for_unknown(self, name: str) -> str:
        return self.unknown_reason

    def to_internal_value(self, data: Any) -> Any:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}  # type: ignore[attr-defined]
            unknown = {str(name): [self.reason_for_unknown(str(name))] for name in sorted(set(data) - writable,
                                                                                         key=str)}
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
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
