"""Faster read serialization for the API's hot list routes, with DRF's exact output.

DRF's `Serializer.to_representation` walks every field of every row through the generic
`Field.get_attribute` (a loop over the dotted source, a Mapping check, a "simple callable" check with
`inspect` per value, exception handling) before the field's own `to_representation`. For a page of 50
tenants with their members that is ~1,200 generic lookups, about a third of the request's CPU
(benchmarks/README.md, "API").

`CompiledRepresentation` decides once per serializer instance (the child of a `many=True` list is one
instance for all rows) how each field is read:

- a plain model column (the source is one concrete, non-relation field's attribute name) is read with
  `operator.attrgetter`; a Char/Integer/JSON field's representation is then `str`/`int`/the value
  itself, any other field's (dates, decimals, choices) its own `to_representation`;
- a column reached through forward foreign keys (`tenant.slug`) is read the same way;
- dates and decimals get DRF's formatting with what DRF recomputes per value (the current zone, the
  decimal context and quantum) computed once per serializer;
- every other field (dotted sources, properties, callables, nested serializers, dates and decimals with
  their formatting) goes through DRF's own `get_attribute` and `to_representation`, unchanged.

The plan is shared by every instance of the serializer class (per current time zone and decimal
context) when none of its fields can depend on the request: every field is of a context-free DRF class
(exactly; a subclass might read `self.context`) or a nested compiled serializer that is itself
shareable. Building a ModelSerializer's fields (`get_fields`: model introspection, deep copies, one
`build_field` per column) cost ~1.5 ms per serializer per request; a shared plan skips it. A serializer
with any other field keeps a plan per instance (its fields bound to that request's context).

The output is identical to DRF's (tests/api/test_representation.py compares both on the same rows).
"""

from __future__ import annotations

import decimal
import inspect
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone
from django.utils.functional import cached_property
from rest_framework import ISO_8601
from rest_framework import fields as f
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.serializers import BaseSerializer, ListSerializer
from rest_framework.settings import api_settings

# Exact classes only: a subclass may override to_representation.
_DIRECT: Mapping[type, Callable[[Any], Any] | None] = MappingProxyType({
    f.CharField: str,
    f.IntegerField: int,
    f.JSONField: None,  # non-binary: the value itself (checked below)
})


def _datetime(field: f.DateTimeField) -> Callable[[Any], Any]:
    """DateTimeField.to_representation for the ISO 8601 case with the zone resolved once (DRF asks
    asgiref's context-local for the current zone per value). Anything else: the field's own method."""
    if getattr(field, "format", api_settings.DATETIME_FORMAT) != ISO_8601 or not settings.USE_TZ:
        return field.to_representation
    zone = field.timezone if hasattr(field, "timezone") else timezone.get_current_timezone()
    if zone is None:
        return field.to_representation
    slow = field.to_representation

    def represent(value: Any) -> Any:
        if type(value) is not datetime or value.tzinfo is None:
            return slow(value)
        text = value.astimezone(zone).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return represent


def _decimal(field: f.DecimalField) -> Callable[[Any], Any]:
    """DecimalField.to_representation (string output) with the quantum and context built once (DRF
    copies the decimal context and computes the quantum per value)."""
    coerce = getattr(field, "coerce_to_string", api_settings.COERCE_DECIMAL_TO_STRING)
    if not coerce or field.localize or field.normalize_output or field.decimal_places is None:
        return field.to_representation
    context = decimal.getcontext().copy()
    if field.max_digits is not None:
        context.prec = field.max_digits
    quantum = decimal.Decimal(".1") ** field.decimal_places
    rounding = field.rounding
    slow = field.to_representation

    def represent(value: Any) -> Any:
        if type(value) is not decimal.Decimal:
            return slow(value)
        return f"{value.quantize(quantum, rounding=rounding, context=context):f}"

    return represent


# Fields whose get_attribute / to_representation read nothing but the row and their own settings (never
# `self.context`, i.e. not the request): a plan holding them may serve every request.
_CONTEXT_FREE: frozenset[type] = frozenset({
    f.CharField, f.IntegerField, f.BooleanField,
    f.DateTimeField, f.DateField, f.DecimalField, f.FloatField, f.JSONField, f.ChoiceField, f.UUIDField,
    f.ReadOnlyField,
    *([f.BigIntegerField] if hasattr(f, "BigIntegerField") else []),  # DRF >= 3.16 maps BigAutoField to it
})


def _context_free(field: f.Field) -> bool:
    if type(field) in _CONTEXT_FREE:
        return True
    if isinstance(field, ListSerializer):
        return isinstance(field.child, CompiledRepresentation) and field.child._shareable()
    return isinstance(field, CompiledRepresentation) and field._shareable()


def _plan_key() -> tuple[Any, ...]:
    """What a plan's converters resolved from the environment: the current zone, the decimal context."""
    context = decimal.getcontext()
    return (timezone.get_current_timezone(), context.prec, context.rounding, context.Emax, context.Emin)


def _choice(field: f.ChoiceField) -> Callable[[Any], Any]:
    """ChoiceField.to_representation for a plain string as loaded from the database (enum members and
    anything else: the field's own method)."""
    choices = field.choice_strings_to_values
    slow = field.to_representation

    def represent(value: Any) -> Any:
        if type(value) is not str or value == "":
            return slow(value)
        return choices.get(value, value)

    return represent


def _converter(field: f.Field) -> Callable[[Any], Any]:
    kind = type(field)
    if kind is f.ChoiceField:
        return _choice(field)  # type: ignore[arg-type]
    if kind is f.DateTimeField:
        return _datetime(field)  # type: ignore[arg-type]
    if kind is f.DecimalField:
        return _decimal(field)  # type: ignore[arg-type]
    return field.to_representation


def _column_names(model: Any) -> set[str]:
    """Attributes that hold a column's value as loaded (no relation: those may raise DoesNotExist)."""
    return {field.attname for field in model._meta.concrete_fields if not field.is_relation}


def _forward_path(model: Any, attrs: list[str]) -> bool:
    """`attrs` walks forward foreign keys / one-to-ones of `model` to a plain column (`tenant.slug`)."""
    for attr in attrs[:-1]:
        try:
            relation = model._meta.get_field(attr)
        except Exception:  # a property or anything else that is not a model field
            return False
        if not (relation.is_relation and (relation.many_to_one or relation.one_to_one)
                and relation.concrete):
            return False
        model = relation.related_model
    return attrs[-1] in _column_names(model)


Plan = list[tuple[str, Callable[[Any], Any] | None, Callable[[Any], Any] | None, Any]]


def _forward_or_none(attrs: list[str]) -> Callable[[Any], Any]:
    """`tenant.slug`, None when a relation on the way is None (for fields whose default is None)."""
    *relations, column = attrs

    def get(instance: Any) -> Any:
        for relation in relations:
            instance = getattr(instance, relation)
            if instance is None:
                return None
        return getattr(instance, column)

    return get


def _is_property(model: Any, attr: str) -> bool:
    return isinstance(inspect.getattr_static(model, attr, None), property | cached_property)


def _property_getter(attr: str) -> Callable[[Any], Any]:
    read = attrgetter(attr)

    def get(instance: Any) -> Any:
        value = read(instance)
        if callable(value):
            raise AttributeError(attr)  # DRF calls a callable attribute: let DRF's path do it
        return value

    return get


def _reverse_cache_name(model: Any, attr: str) -> str | None:
    """The prefetch cache key of `model.<attr>` when it is a reverse foreign key (one-to-many)."""
    try:
        relation = model._meta.get_field(attr)
    except Exception:  # not a model field
        return None
    if not (relation.auto_created and relation.one_to_many and relation.get_accessor_name() == attr):
        return None
    return relation.cache_name if hasattr(relation, "cache_name") else relation.get_cache_name()


def _prefetched_getter(cache_name: str) -> Callable[[Any], Any]:
    def get(instance: Any) -> Any:
        try:
            cached = instance._prefetched_objects_cache[cache_name]
        except (AttributeError, KeyError):
            raise AttributeError(cache_name) from None  # not prefetched: DRF's path (a query)
        return cached._result_cache if cached._result_cache is not None else list(cached)

    return get


def _each(child: Any) -> Callable[[Any], Any]:
    represent = child.to_representation
    return lambda rows: [represent(row) for row in rows]


class CompiledRepresentation:
    """Mixin for read-only ModelSerializers (before `serializers.ModelSerializer` in the bases)."""

    # Per class: {_plan_key(): plan}, for classes whose plan is shareable; None: not decided yet.
    _shared_plans: dict[tuple[Any, ...], Plan] | None = None
    _shared_lock = threading.Lock()

    def _shareable(self) -> bool:
        """Whether this class's plan may serve every instance (decided once per class, from its fields)."""
        cls = type(self)
        decided = cls.__dict__.get("_plans_shareable")
        if decided is None:
            decided = all(_context_free(field) for field in self._readable_fields)  # type: ignore[attr-defined]
            cls._plans_shareable = decided  # type: ignore[attr-defined]
        return decided  # type: ignore[no-any-return]

    def _partial(self) -> bool:
        return bool(getattr(self.root, "partial", False))  # type: ignore[attr-defined]

    def _compiled(self) -> Plan:
        plan = self.__dict__.get("_representation_plan")
        if plan is not None:
            return plan  # type: ignore[no-any-return]
        cls = type(self)
        # A partial serializer's defaults differ (DRF skips them): its own plan, never a shared one.
        if cls.__dict__.get("_plans_shareable") is not False and not self._partial():
            plans = cls.__dict__.get("_shared_plans")
            key = _plan_key()
            plan = plans.get(key) if plans is not None else None
            if plan is None and self._shareable():
                plan = self._build_plan()
                with self._shared_lock:
                    if cls.__dict__.get("_shared_plans") is None:
                        cls._shared_plans = {}
                    cls._shared_plans.setdefault(key, plan)  # type: ignore[union-attr]
            if plan is not None:
                self.__dict__["_representation_plan"] = plan
                return plan
        plan = self._build_plan()
        self.__dict__["_representation_plan"] = plan
        return plan

    def _build_plan(self) -> Plan:
        columns = _column_names(self.Meta.model)  # type: ignore[attr-defined]
        plan = []
        for field in self._readable_fields:  # type: ignore[attr-defined]
            attrs = field.source_attrs
            kind = type(field)
            direct = (kind in _DIRECT and len(attrs) == 1 and attrs[0] in columns
                      and not (kind is f.JSONField and field.binary))
            if direct:
                plan.append((field.field_name, attrgetter(attrs[0]), _DIRECT[kind], None))
            elif len(attrs) == 1 and attrs[0] in columns and not isinstance(field, BaseSerializer):
                # A column with its field's own formatting (dates, decimals, choices).
                plan.append((field.field_name, attrgetter(attrs[0]), _converter(field), None))
            elif len(attrs) > 1 and not isinstance(field, BaseSerializer) and _forward_path(
                    self.Meta.model, attrs):  # type: ignore[attr-defined]
                # `tenant.slug`: read through the (selected) relation; a missing relation (None on the
                # way) takes DRF's path below, which applies the field's default / null rules -- except
                # for `default=None` outside a partial serializer, where DRF's answer is None.
                getter = (_forward_or_none(attrs) if field.default is None and not self._partial()
                          else attrgetter(".".join(attrs)))
                plan.append((field.field_name, getter, _converter(field), field))
            elif len(attrs) == 1 and not isinstance(field, BaseSerializer) and _is_property(
                    self.Meta.model, attrs[0]):  # type: ignore[attr-defined]
                # `namespace`, `is_synced`: a property read directly; DRF's path if it raises or returns a
                # callable (which DRF would call).
                convert = (_DIRECT[kind] if kind in _DIRECT and not (kind is f.JSONField and field.binary)
                           else _converter(field))
                plan.append((field.field_name, _property_getter(attrs[0]), convert, field))
            elif (len(attrs) == 1 and isinstance(field, ListSerializer)
                  and isinstance(field.child, CompiledRepresentation)
                  and (cache_name := _reverse_cache_name(self.Meta.model, attrs[0])) is not None):  # type: ignore[attr-defined]
                # A nested list over a prefetched reverse relation: its cached rows straight to the
                # child (ListSerializer would ask the related manager for `.all()`, i.e. that cache).
                plan.append((field.field_name, _prefetched_getter(cache_name), _each(field.child), field))
            else:
                plan.append((field.field_name, None, None, field))
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        if isinstance(instance, Mapping):  # validated data, not a row: DRF's way
            return super().to_representation(instance)  # type: ignore[misc,no-any-return]
        ret: dict[str, Any] = {}
        for name, getter, convert, field in self._compiled():
            if getter is not None:
                try:
                    value = getter(instance)
                except (AttributeError, ObjectDoesNotExist):
                    if field is None:
                        raise
                else:
                    ret[name] = value if value is None or convert is None else convert(value)
                    continue
            # DRF's generic path (Serializer.to_representation), field by field.
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            ret[name] = None if check_for_none is None else field.to_representation(attribute)
        return ret


def row_lookups(serializer_class: type[CompiledRepresentation]) -> tuple[str, ...]:
    """The ORM lookups (`"role"`, `"user__username"`) that give every field of a compiled serializer, for
    reading its rows with `values_list` (gpufleet.api.prefetch.attach_rows) instead of model objects.

    Only for serializers whose every field is a plain column of the model or a column one forward
    relation away: anything else (a property, a method, a nested serializer) needs the model, and asking
    for it here is an error rather than a silently different answer.
    """
    serializer: Any = serializer_class()
    model = serializer.Meta.model
    columns = _column_names(model)
    lookups = []
    for field in serializer._readable_fields:
        attrs = field.source_attrs
        plain = len(attrs) == 1 and attrs[0] in columns
        related = len(attrs) == 2 and _forward_path(model, attrs)
        if isinstance(field, BaseSerializer) or not (plain or related):
            raise ValueError(f"{serializer_class.__name__}.{field.field_name} is not a column: rows cannot give it")
        lookups.append("__".join(attrs))
    return tuple(lookups)


def read_columns(serializer_class: type[CompiledRepresentation]) -> tuple[str, ...]:
    """The `QuerySet.only()` names that load what a compiled serializer shows of its model objects: every
    column of the model (its properties compute from them: `period_label` from `period`), and the one column
    each forward relation it shows is read for (`tenant__slug`). Nested serializers are skipped: their rows
    are attached by the caller. Derived, so a field added to the model or the serializer needs no list here.
    """
    serializer: Any = serializer_class()
    model = serializer.Meta.model
    names = [f.name for f in model._meta.concrete_fields]
    for field in serializer._readable_fields:
        attrs = field.source_attrs
        if len(attrs) == 2 and _forward_path(model, attrs):
            names.append("__".join(attrs))
    return tuple(names)


def model_rows(serializer_class: type[CompiledRepresentation]) -> tuple[tuple[str, ...], type]:
    """(lookups, row class) for reading a compiled serializer's rows without model objects when it also
    shows properties of the model (`namespace`) or nested lists the caller attaches (prefetch.attach_rows):
    every column of the model is fetched, as for a model object, and the row class carries the model's
    own property objects for the properties the serializer reads, so they compute from the same columns.
    Anything else (a method, a non-column path) is refused.
    """
    from .prefetch import Row

    serializer: Any = serializer_class()
    model = serializer.Meta.model
    columns = _column_names(model)
    lookups = [f.attname for f in model._meta.concrete_fields if not f.is_relation]
    lookups += [f.attname for f in model._meta.concrete_fields if f.is_relation]
    properties = {}
    for field in serializer._readable_fields:
        attrs = field.source_attrs
        if isinstance(field, ListSerializer) and len(attrs) == 1 and _reverse_cache_name(model, attrs[0]):
            continue  # attached by the caller
        if isinstance(field, BaseSerializer):
            raise ValueError(f"{serializer_class.__name__}.{field.field_name}: a nested serializer rows cannot give")
        if len(attrs) == 1 and attrs[0] in columns:
            continue
        if len(attrs) == 1 and _is_property(model, attrs[0]):
            properties[attrs[0]] = inspect.getattr_static(model, attrs[0])
            continue
        if len(attrs) == 2 and _forward_path(model, attrs):
            lookups.append("__".join(attrs))
            continue
        raise ValueError(f"{serializer_class.__name__}.{field.field_name} is not a column: rows cannot give it")
    return tuple(lookups), type(f"{model.__name__}Row", (Row,), properties)
