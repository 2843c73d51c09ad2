"""A page's children in one query, without Django's per-object queryset clones.

`prefetch_related(Prefetch("memberships", queryset))` runs one query for the children -- and then, for
every parent on the page, clones and filters a queryset to hold them (`_apply_rel_filters`). For a page
of 50 tenants that cloning was the largest single cost of the request, more than the SQL and the JSON
(benchmarks/README.md, "API"). `attach_children` runs the same one query and stores each parent's rows
where Django's prefetch stores them, so `tenant.memberships.all()` (and every serializer) reads them
without a query.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet


def attach_children(parents: Sequence[Any], related_name: str, queryset: QuerySet) -> Sequence[Any]:
    """For a reverse foreign key `related_name` of the parents' model: one query (`queryset`, filtered to
    the parents), the rows put in each parent's prefetch cache in the queryset's order, and each row's
    foreign key pointed at its parent object (no query to walk back up)."""
    if not parents:
        return parents
    relation = type(parents[0])._meta.get_field(related_name)
    foreign_key = relation.field  # the ForeignKey on the child model
    by_parent: dict[Any, list[Any]] = defaultdict(list)
    for row in queryset.filter(**{f"{foreign_key.attname}__in": [p.pk for p in parents]}):
        by_parent[getattr(row, foreign_key.attname)].append(row)
    for parent in parents:
        rows = by_parent.get(parent.pk, [])
        for row in rows:
            foreign_key.set_cached_value(row, parent)
        holder = QuerySet(model=queryset.model)
        holder._result_cache = rows
        holder._prefetch_done = True
        if not hasattr(parent, "_prefetched_objects_cache"):
            parent._prefetched_objects_cache = {}
        parent._prefetched_objects_cache[related_name] = holder
    return parents


def attach_rows(parents: Sequence[Any], related_name: str, queryset: QuerySet,
                lookups: Sequence[str]) -> Sequence[Any]:
    """`attach_children` for read-only answers: each child is a plain row object carrying only `lookups`
    (`"role"`, or `"user__username"`, read back as `row.user.username`), not a model instance.

    For a page of 50 tenants that is 150 membership rows without 300 model objects (`Model.from_db`,
    its signals and descriptors were the largest cost left in the list: benchmarks/README.md, "API").
    The serializers read rows by attribute (gpufleet.api.representation), so a row gives the same answer
    as the model would: a relation that is NULL in the database is None on the row, as on the model.
    Only for answers: a row has no methods, no `save`, no other columns.
    """
    if not parents:
        return parents
    foreign_key = type(parents[0])._meta.get_field(related_name).field
    relations = sorted({lookup.split("__", 1)[0] for lookup in lookups if "__" in lookup})
    # Per lookup: (attribute, nested attribute or None, index in the fetched row).
    plan = [(*(lookup.split("__", 1) if "__" in lookup else (lookup, None)), i + 1)
            for i, lookup in enumerate(lookups)]
    if any(nested is not None and "__" in nested for _, nested, _ in plan):
        raise ValueError("attach_rows follows one relation level")
    first_relation = len(lookups) + 1
    by_parent: dict[Any, list[Row]] = defaultdict(list)
    rows = queryset.filter(**{f"{foreign_key.attname}__in": [p.pk for p in parents]}).values_list(
        foreign_key.attname, *lookups, *relations)
    for values in rows:
        row = Row()
        related = {name: (None if values[first_relation + k] is None else Row())
                   for k, name in enumerate(relations)}
        for attr, nested, index in plan:
            if nested is None:
                setattr(row, attr, values[index])
            elif related[attr] is not None:
                setattr(related[attr], nested, values[index])
        for name, value in related.items():
            setattr(row, name, value)
        by_parent[values[0]].append(row)
    for parent in parents:
        holder = QuerySet(model=queryset.model)
        holder._result_cache = by_parent.get(parent.pk, [])
        holder._prefetch_done = True
        if not hasattr(parent, "_prefetched_objects_cache"):
            parent._prefetched_objects_cache = {}
        parent._prefetched_objects_cache[related_name] = holder
    return parents


class Row:
    """A child row of `attach_rows`: attributes only."""

    def __repr__(self) -> str:
        return f"Row({vars(self)!r})"
