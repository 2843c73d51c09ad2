"""PostgreSQL's COPY for bulk inserts: the platform's one fast path around the ORM (docs/adr/0002).

`copy_rows(model, columns, rows)` writes rows through psycopg 3's own COPY API in binary format: the
column types are derived from the model's fields (`set_types`), psycopg's C dumpers encode each value
(`write_row`), and PostgreSQL reads ids, timestamps and numerics without parsing text. The database stores
what `bulk_create` would store: numeric columns round to their scale on input, binary or text alike, and
timestamps travel as UTC instants.

No model signals, no `save()`, no per-row foreign-key triggers of Django's: callers use it for rows nothing
listens to (usage rows, invoice lines) and check what they refer to themselves. The `GPUFLEET_PG_COPY` setting
(default on) turns it off: every call then goes through `bulk_create`, the same rows, slower.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.db import connection, models
from psycopg.adapt import Dumper
from psycopg.pq import Format

from . import conf

# Django's column type (`numeric(20, 6)`, `varchar(63)`) without its modifiers: the name psycopg's type
# registry knows (its built-in types are registered under both `int8` and `bigint`, etc.).
_MODIFIERS = re.compile(r"\(.*\)")


def columns(model: type[models.Model], *, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """The model's column names (`attname`: `tenant_id`, not `tenant`) in field order, without its
    auto-generated primary key: what a COPY of new rows names. Derived from the model, so a field added
    to the model is a column here without another list to edit."""
    skip = set(exclude)
    return tuple(f.column for f in model._meta.concrete_fields
                 if not (f.primary_key and isinstance(f, models.AutoField)) and f.attname not in skip)


def column_types(model: type[models.Model], names: Sequence[str]) -> list[str]:
    """The PostgreSQL type names of the columns, for psycopg's `Copy.set_types`."""
    by_column = {f.column: f for f in model._meta.concrete_fields}
    return [_MODIFIERS.sub("", by_column[name].db_type(connection) or "").strip() for name in names]


# Bulk rows repeat a few numbers (a month of usage: ~10^5 rows, a few thousand distinct values): a numeric's
# binary encoding is computed once per distinct value and COPY, which is cheaper than psycopg's C encoder
# per value; timestamps are not (their C encoder costs less than a Python call). Figures: docs/adr/0002.
MEMOIZED_TYPES = {"numeric": Decimal}


@functools.cache
def _memoizing(python_type: type, inner: type[Dumper]) -> type[Dumper]:
    """A binary dumper for the same PostgreSQL type as `inner` that encodes each distinct value once, through
    `inner`. Equal values share an encoding: equal Decimals (7200 and 7200.000) are stored alike by a column's
    scale."""

    class Memoizing(Dumper):
        format = Format.BINARY
        oid = inner.oid

        def __init__(self, cls: type, context: Any = None) -> None:
            super().__init__(cls, context)
            self._encode = inner(cls, context).dump
            self._memo: dict[Any, bytes] = {}

        def dump(self, obj: Any) -> bytes:
            encoded = self._memo.get(obj)
            if encoded is None:
                encoded = self._memo[obj] = bytes(self._encode(obj))
            return encoded

    Memoizing.__name__ = f"Memoizing{python_type.__name__.title()}Dumper"
    return Memoizing


def enabled() -> bool:
    return conf.PG_COPY


def copy_rows(model: type[models.Model], names: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert `rows` (values in `names` order) into the model's table with one binary COPY; returns how
    many. Runs on Django's connection, inside the caller's transaction."""
    if not enabled():
        return _bulk_create(model, names, rows)
    table = connection.ops.quote_name(model._meta.db_table)
    quoted = ", ".join(connection.ops.quote_name(name) for name in names)
    types = column_types(model, names)
    count = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg 3's cursor under Django's: its own adapters map, this COPY's only
        adapters = raw.adapters
        for name, python_type in MEMOIZED_TYPES.items():
            encoder = adapters.get_dumper_by_oid(adapters.types[name].oid, Format.BINARY)
            adapters.register_dumper(python_type, _memoizing(python_type, encoder))
        with raw.copy(f"COPY {table} ({quoted}) FROM STDIN (FORMAT binary)") as copy:
            copy.set_types(types)
            write = copy.write_row
            for row in rows:
                write(row)
                count += 1
    return count


def _bulk_create(model: type[models.Model], names: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """The same rows through the ORM (COPY turned off)."""
    by_column = {f.column: f.attname for f in model._meta.concrete_fields}
    attnames = [by_column[name] for name in names]
    objects = [model(**dict(zip(attnames, row, strict=True))) for row in rows]
    model._default_manager.bulk_create(objects, batch_size=1000)
    return len(objects)
