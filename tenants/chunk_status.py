"""A fleet pass's chunk of tenants: locks, rows and status writes in a few statements, not several per tenant.

On the cold start every tenant costs the reconcile an advisory lock, a row read, a status UPDATE in a
transaction and an unlock: five or six round trips and ORM compilations, about a third of the pass's CPU
once rendering moved to workers (tenants.prerender). Inside `chunk_status(ids)` the reconcile of a tenant
of the chunk (`reconcile._reconcile_tenant`) finds its lock already held and its row already read -- both
taken together, the row read under the lock as before -- and a status write that moves no phase (so
audits nothing: `ready` stays `ready`) is kept and written with the chunk's others in one UPDATE when the
chunk ends, after its commit; the locks are released after that, so the status is still written under the
lock. A tenant whose lock another session holds is left to the ordinary path, which waits for it: the chunk
never waits while holding locks, so no two sessions wait on each other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpufleet.bulk import update_rows

from .locks import release_many, try_exclusive_many
from .models import Tenant

log = logging.getLogger(__name__)

# The status fields a successful reconcile writes (besides phase and conditions): only writes of exactly
# these are deferred, so the one UPDATE has one shape.
DEFERRED_FIELDS = frozenset({"observed_generation", "applied_digest", "applied_objects", "last_reconciled_at"})


@dataclass
class ChunkStatus:
    locked: set[int] = field(default_factory=set)
    rows: dict[int, Tenant] = field(default_factory=dict)
    writes: dict[int, tuple[str, list[dict], dict[str, Any]]] = field(default_factory=dict)

    def row(self, tenant_id: int) -> tuple[bool, Tenant | None]:
        """(locked here, the row read under the lock: None if it is gone)."""
        if tenant_id not in self.locked:
            return False, None
        return True, self.rows.get(tenant_id)

    def defer(self, tenant: Tenant, phase: str, conditions: list[dict], fields: dict[str, Any]) -> bool:
        """Keep the status write for the chunk's UPDATE; False if it must be written now (a phase that
        moves is audited, another set of fields is another statement)."""
        if tenant.pk not in self.locked or phase != tenant.phase or fields.keys() != DEFERRED_FIELDS:
            return False
        self.writes[tenant.pk] = (phase, conditions, fields)
        return True


@contextmanager
def chunk_status(tenant_ids: list[int]) -> Iterator[ChunkStatus]:
    """See the module docstring. The kept writes are flushed even if the chunk failed part-way (each is the
    status of an apply that happened; a failed commit is then taken back by `reconcile.mark_uncommitted`)."""
    status = ChunkStatus()
    status.locked = set(try_exclusive_many("tenant", tenant_ids))
    failed = False
    try:
        if status.locked:
            status.rows = {t.pk: t for t in Tenant.objects.filter(pk__in=status.locked)}
        yield status
    except BaseException:
        failed = True
        raise
    finally:
        try:
            _flush(status.writes)
        except Exception:
            if not failed:
                raise
            log.exception("writing the status of %d tenants failed", len(status.writes))
        finally:
            release_many("tenant", sorted(status.locked))


def _flush(writes: dict[int, tuple[str, list[dict], dict[str, Any]]]) -> None:
    """One UPDATE of every kept write (`gpufleet.bulk.update_rows`)."""
    if not writes:
        return
    fields = ["phase", "conditions", *sorted(DEFERRED_FIELDS)]
    update_rows(Tenant, {pk: {"phase": phase, "conditions": conditions, **values}
                         for pk, (phase, conditions, values) in writes.items()}, fields)
    writes.clear()
