"""A page's children and rows in one query each, without model objects or per-object queryset clones.

`prefetch_related(Prefetch("memberships", queryset))` runs one query for the children -- and then, for
every parent on the page, clones and filters a queryset to hold them (`_apply_rel_filters`), and builds a
model object per child. For a page of 50 tenants that was the largest single cost of the request, more than
the SQL and the JSON (benchmarks/README.md, "API"). `attach_rows` runs the same one query and hands each
parent plain rows carrying only the columns its serializer shows; `as_rows` does the same for the page.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db.models import QuerySet
from django.db.models.query import ValuesListIterable


def _row_maker(lookups: Sequence[str], offset: int,
               row_class: type[Row] | None = None) -> tuple[list[str], Callable[[Sequence[Any]], Row]]:
    """(the extra columns to fetch after `lookups`, a function from a fetched row to a Row), for rows
    whose `lookups` start at index `offset`. A lookup through a relation (`user__username`) fetches the
    relation's key too, so a NULL relation reads as None on the row, as on a model."""
    relations = sorted({lookup.split("__", 1)[0] for lookup in lookups if "__" in lookup})
    if any(lookup.count("__") > 1 for lookup in lookups):
        raise ValueError("rows follow one relation level")
    plain = [(lookup, offset + i) for i, lookup in enumerate(lookups) if "__" not in lookup]
    first_relation = offset + len(lookups)
    nested = [(name, first_relation + k,
               [(lookup.split("__", 1)[1], offset + i) for i, lookup in enumerate(lookups)
                if lookup.split("__", 1)[0] == name and "__" in lookup])
              for k, name in enumerate(relations)]

    new = row_class or Row

    def make(values: Sequence[Any]) -> Row:
        row = new()
        attrs = row.__dict__
        for name, index in plain:
            attrs[name] = values[index]
        for name, key_index, columns in nested:
            if values[key_index] is None:
                attrs[name] = None
            else:
                related = Row()
                related.__dict__.update((column, values[index]) for column, index in columns)
                attrs[name] = related
        return row

    return relations, make


class _RowIterable(ValuesListIterable):
    """A `values_list` queryset's rows as Row objects (see `as_rows`); subclassed per column set, since
    a queryset's clones (filter, order_by, slicing) keep its iterable class and nothing else of ours."""

    make: Callable[[Sequence[Any]], Row]

    def __iter__(self):  # type: ignore[no-untyped-def]
        make = self.make
        for values in super().__iter__():
            yield make(values)


@cache
def _row_iterable(lookups: tuple[str, ...], row_class: type[Row] | None) -> tuple[type[_RowIterable], tuple[str, ...]]:
    """(the iterable class, the columns to fetch) of rows with `lookups` and `pk`."""
    relations, make = _row_maker(lookups, 0, row_class)
    pk_index = len(lookups) + len(relations)

    def with_pk(values: Sequence[Any]) -> Row:
        row = make(values)
        row.pk = values[pk_index]
        return row

    iterable = type("RowIterable", (_RowIterable,), {"make": staticmethod(with_pk)})
    return iterable, (*lookups, *relations, "pk")


def as_rows(queryset: QuerySet, lookups: Sequence[str], row_class: type[Row] | None = None) -> QuerySet:
    """`queryset` (scoped, filtered: unchanged) yielding Row objects with `lookups` and `pk` instead of
    model objects. It stays a queryset: pagination filters, orders and slices it as before (clones keep
    the row form). For read-only answers whose serializer reads only columns (representation.row_lookups),
    or, with `row_class`, every column and the model's properties it shows (representation.model_rows)."""
    iterable, columns = _row_iterable(tuple(lookups), row_class)
    rows = queryset.values_list(*columns)
    rows._iterable_class = iterable
    return rows


def attach_rows(parents: Sequence[Any], related_name: str, queryset: QuerySet,
                lookups: Sequence[str], parent_model: Any = None) -> Sequence[Any]:
    """For a reverse foreign key `related_name` of the parents' model: one query (`queryset`, filtered to
    the parents), each parent's children put where Django's prefetch puts them, in the queryset's order --
    and each child a plain row object carrying only `lookups`
    (`"role"`, or `"user__username"`, read back as `row.user.username`), not a model instance.

    For a page of 50 tenants that is 150 membership rows without 300 model objects (`Model.from_db`,
    its signals and descriptors were the largest cost left in the list: benchmarks/README.md, "API").
    The serializers read rows by attribute (gpufleet.api.representation), so a row gives the same answer
    as the model would: a relation that is NULL in the database is None on the row, as on the model.
    Only for answers: a row has no methods, no `save`, no other columns.
    """
    if not parents:
        return parents
    # Parents may be rows themselves (as_rows): then their model is named.
    foreign_key = (parent_model or type(parents[0]))._meta.get_field(related_name).field
    relations, make = _row_maker(lookups, 1)
    by_parent: dict[Any, list[Row]] = defaultdict(list)
    rows = queryset.filter(**{f"{foreign_key.attname}__in": [p.pk for p in parents]}).values_list(
        foreign_key.attname, *lookups, *relations)
    for values in rows:
        by_parent[values[0]].append(make(values))
    # One (empty) query for all the holders: a holder is only read (its rows are cached), and any
    # filter on it clones the query first.
    shared = QuerySet(model=queryset.model).query
    for parent in parents:
        holder = QuerySet(model=queryset.model, query=shared)
        holder._result_cache = by_parent.get(parent.pk, [])
        holder._prefetch_done = True
        if not hasattr(parent, "_prefetched_objects_cache"):
            parent._prefetched_objects_cache = {}
        parent._prefetched_objects_cache[related_name] = holder
    return parents


class Row:
    """A row of `attach_rows` / `as_rows`: attributes only."""

    def __repr__(self) -> str:
        return f"Row({vars(self)!r})"
