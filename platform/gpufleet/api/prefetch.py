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
