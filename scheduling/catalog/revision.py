"""The GPU catalog's token: a scope of the platform's data versions (gpufleet.api.dataversion, docs/adr/0004).

Every single-tenant reconcile needs the catalog (flavors, node pools, cohorts, priority classes, per-cluster
offers): six queries and their objects per event (figures: docs/adr/0004), for rows an admin changes a few
times a month. `scheduling.inputs.load_catalog` keeps what it built per process and reuses it while this
token stays the same: one query instead of six.

The catalog's tables carry the data-change trigger with the argument `catalog` (migration scheduling 0012),
so every statement that changes one -- a queryset `update()`, a `bulk_create`, raw SQL, a `TRUNCATE` -- draws
a new random token inside its own transaction: that transaction sees its own changes' token, others see it
once it commits, and a rolled-back change never leaves a token a later change could draw again. A process
checks once that every catalog table has the trigger, and caches nothing if not.
"""

from __future__ import annotations

from typing import Any

from gpufleet.api import dataversion

SCOPE = "catalog"
# The tables the catalog is built from (scheduling.inputs.load_catalog). Not scheduling_cluster: its status
# columns change on every apply, so load_catalog reads the clusters each time (one query, a few rows).
TABLES = (
    "scheduling_gpumodel",
    "scheduling_flavor",
    "scheduling_gpunodepool",
    "scheduling_cohort",
    "scheduling_priorityclass",
    "scheduling_clusterflavor",
)


def install(connection: Any) -> None:
    """(Re)install the catalog's triggers (the migration does; tests that removed one call it)."""
    dataversion.watch_scope(connection, TABLES, SCOPE)


def installed(connection: Any) -> bool:
    return dataversion.scope_installed(connection, TABLES, SCOPE)


def current(connection: Any) -> int | None:
    """The catalog's token now, or None when it cannot be trusted (then the catalog is built afresh)."""
    return dataversion.scope_token(connection, TABLES, SCOPE)


forget_checks = dataversion.forget_checks

