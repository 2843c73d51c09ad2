"""Fleet-wide reconcile: every live tenant in one pass, cheap when nothing changed.

`reconcile_all` (beat) and the fleet sync (scheduling.clusters.sync) run this instead of one task per
tenant. For each live tenant it renders the desired state (platform-wide inputs loaded once) and
asks the backend, read-only and without git, whether applying would change anything. A tenant in
a steady phase whose render equals what it last applied and whose files are intact is *clean*:
nothing is written, not even its status row (one bulk update stamps `last_reconciled_at`).
Everything else -- a new generation, a phase to move, a drifted or missing file, a render error --
goes through the ordinary `reconcile.reconcile_tenant` (per-tenant lock, validation, status,
audit), and on the GitOps backend those applies share one commit per chunk (`GitOpsBackend.batch`),
so a cold start of a thousand tenants is a handful of commits, not a thousand.

At 10,000 tenants even rendering every tenant is too slow for a periodic pass, so the pass keeps,
per process, what each set of render inputs rendered (`_KNOWN`: digest, object count and the
backend's comparison token, e.g. the GitOps tree id), keyed by the inputs themselves: the
platform-wide context, the tenant's view (row fields, quotas, isolation...), the schema registry.
Rendering is pure, so an entry never goes stale -- a changed input is a different key -- and
whether the repository still holds that state is asked of the backend every pass (`token_in_sync`:
HEAD's tree, `git status`, the drift record): a hand edit is found whatever the memo says.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from django.db import connection

from gpufleet import clock, gcpause
from gpufleet.core import conf, registry
from infra.backend import (
    ApplyResult,
    Backend,
    Batches,
    ChecksFingerprints,
    ChecksFingerprintsInBulk,
    ComparesInSync,
    Fingerprints,
    Maintains,
)
from infra.errors import InfraError, TransientError

from . import prerender, reconcile
from .backends import get_backend, get_schema_registry
from .chunk_status import chunk_status
from .models import Phase, Tenant
from .render import RenderContext, TenantView, placed_digest, render_placed

log = logging.getLogger(__name__)
T = TypeVar("T")

# Phases in which "the render equals what was applied" means there is nothing to do.
STEADY = {Phase.READY, Phase.SUSPENDED}
# Tenants reconciled per commit on the cold path (bounded so a commit stays reviewable and a
# failure part-way loses little).
CHUNK = 250
# Tenants whose render inputs are loaded together (bounds memory; on PostgreSQL the ids are one array
# parameter, `reconcile.ids_in`, so a larger chunk is fewer round trips, not longer statements).
VIEW_CHUNK = 2000


@dataclass
class FleetPass:
    platform: ApplyResult | None = None
    clean: dict[str, int] = field(default_factory=dict)  # slug -> objects verified unchanged
    outcomes: list[reconcile.Outcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Tenants that hit a transient error: the caller hands them to the retrying per-tenant task.
    retry: list[int] = field(default_factory=list)
    # Backends that cannot compare cheaply (Kubernetes: every comparison is API calls) keep the
    # fan-out: the caller enqueues one task per tenant, spread over the workers.
    deferred: list[int] = field(default_factory=list)

    @property
    def tenants(self) -> int:
        return len(self.clean) + len(self.outcomes) + len(self.deferred)


@dataclass(frozen=True)
class Known:
    """What one set of render inputs renders: valid manifests with this digest (`placed_digest`) and object
    count, and per host cluster the tenant is placed on, its owner there and the backend's token for its
    objects on that cluster (`GitOpsBackend.token`)."""

    digest: str
    objects: int
    token: tuple[tuple[str, object], ...]


# Render-input key -> Known. Rebuilt each pass from the keys that pass used (bounded by the fleet).
_KNOWN: dict[bytes, Known] = {}


def forget_renders() -> None:
    """Drop every remembered render (tests that change render code in place call this)."""
    _KNOWN.clear()


def context_key(ctx: RenderContext, backend: Backend) -> bytes:
    """The part of the render-input key that is the same for every tenant of a pass: the platform-wide
    inputs (with every host cluster: its tree, catalog, trust levels), the schemas objects were validated
    against, and the backend (its token's kind). Keys of `ctx.extra` starting with "_" are caches derived
    from the rest (the per-cluster contexts scheduling builds on first use) and are left out, so the key
    does not depend on whether the platform was rendered before it was taken. A digest: the text is the
    whole catalog, and hashing it again into each of 10,000 tenants' keys was a tenth of a no-op pass."""
    ctx = replace(ctx, extra={k: v for k, v in ctx.extra.items() if not k.startswith("_")})
    text = repr((ctx, conf.REFERENCE_DIR, conf.KUBERNETES_VERSION, type(backend).__name__))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def inputs_key(ctx_key: bytes, view: TenantView) -> bytes:
    # `repr` of the frozen dataclasses keeps every field, its type and order; anything it could not
    # tell apart would only be a miss, never a wrong hit, unless two different inputs print the same.
    return hashlib.blake2b(ctx_key + repr(view).encode(), digest_size=16).digest()


def _needs_render(tenant: Tenant) -> bool:
    """Only steady tenants whose last apply saw their current generation can be clean."""
    return tenant.phase in STEADY and tenant.observed_generation == tenant.generation


def _clean_rendered(tenant: Tenant, view: TenantView, backend: Backend, ctx: RenderContext) -> int | None:
    """A backend without tokens: render and compare every pass. Number of objects if the tenant needs no work,
    else None (it will be reconciled). Every host cluster the tenant is placed on must be in sync."""
    rendered = render_placed(view, ctx)
    manifests = [m for _, objects in rendered for m in objects]
    if placed_digest(rendered) != tenant.applied_digest or get_schema_registry().validate(manifests):
        return None
    in_sync = backend.in_sync  # type: ignore[attr-defined]
    return len(manifests) if all(in_sync(p.owner(tenant.owner), objects) for p, objects in rendered) else None


def _known_applied(
    tenant: Tenant, view: TenantView, backend: Backend, ctx: RenderContext, ctx_key: bytes, seen: dict[bytes, Known]
) -> Known | None:
    """What the tenant's inputs render (remembered, or rendered now), if that is what it last applied; None if
    it will be reconciled. Whether the repository still holds it is asked next (`_in_sync`)."""
    # The placements (and each cluster's tree, catalog and the tenant's quotas there) are a pure function
    # of the view and the context, so the key covers them: a placement added or moved is a new key.
    key = inputs_key(ctx_key, view)
    known = _KNOWN.get(key)
    if known is None:
        rendered = render_placed(view, ctx)
        if get_schema_registry().validate([m for _, objects in rendered for m in objects]):
            return None  # never remembered: the reconcile reports it
        known = _known(placed_digest(rendered), [(p.owner(tenant.owner), objects) for p, objects in rendered],
                       backend.token)  # type: ignore[attr-defined]
    seen[key] = known
    return known if known.digest == tenant.applied_digest else None


def _in_sync(backend: Backend, pending: list[Known]) -> list[bool]:
    """For each `Known`: does the repository hold it on every host cluster? One bulk call where the backend
    has one (`tokens_in_sync`); a check that fails counts as not in sync (the reconcile reports the error)."""
    checks = [pair for known in pending for pair in known.token]
    answers: list[bool] | None = None
    if isinstance(backend, ChecksFingerprintsInBulk):
        try:
            answers = backend.tokens_in_sync(checks)
        except Exception:
            log.exception("fleet reconcile: checking the repository in bulk failed; checking tenant by tenant")
    if answers is None:
        answers = []
        for owner, token in checks:
            try:
                answers.append(backend.token_in_sync(owner, token))  # type: ignore[attr-defined]
            except Exception:
                log.exception("fleet reconcile: checking %s failed", owner)
                answers.append(False)
    flat = iter(answers)
    return [all([next(flat) for _ in known.token]) for known in pending]


def _known(applied: str, placed: list[tuple[str, list[dict]]], token: Callable[[list[dict]], object]) -> Known:
    """`placed`: (owner with its cluster's prefix, manifests) per host cluster the tenant is placed on."""
    return Known(applied, sum(len(objects) for _, objects in placed),
                 tuple((owner, token(objects)) for owner, objects in placed))


def _remember(outcomes: list[reconcile.Outcome], backend: Backend, ctx: RenderContext, ctx_key: bytes,
              seen: dict[bytes, Known]) -> None:
    """What the pass's successful applies rendered (validated, applied and committed on every cluster the
    tenant is placed on: one that failed raised, so there is no outcome to remember), for the next pass."""
    if not isinstance(backend, Fingerprints):
        return
    token = backend.token
    for outcome in outcomes:
        if outcome.rendered is not None and outcome.phase in STEADY and not outcome.problems:
            view, placed, applied = outcome.rendered
            if outcome.tokens is not None:  # rendered ahead (tenants.prerender): its tokens came with it
                objects, owners = outcome.tokens
                seen[inputs_key(ctx_key, view)] = Known(applied, objects, owners)
            else:
                seen[inputs_key(ctx_key, view)] = _known(applied, placed, token)


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _slugs(tenant_ids: set[int]) -> set[str]:
    return set(Tenant.objects.filter(pk__in=tenant_ids).values_list("slug", flat=True))


def _stamp_reconciled(tenant_ids: list[int]) -> None:
    """`last_reconciled_at` of every clean tenant in one statement. The ids go as ONE array literal:
    `pk__in` of 10,000 ids is 10,000 placeholders that Django compiles and psycopg converts one by one
    (0.4 s of a no-op pass at 3,000 tenants)."""
    now = clock.now()
    table, pk = connection.ops.quote_name(Tenant._meta.db_table), connection.ops.quote_name(Tenant._meta.pk.column)
    sql = f"UPDATE {table} SET last_reconciled_at = %s WHERE {pk} = ANY(%s::bigint[])"  # noqa: S608 - names from the model
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, "{" + ",".join(map(str, tenant_ids)) + "}"])


def reconcile_fleet(backend: Backend | None = None, *, message: str = "fleet reconcile") -> FleetPass:
    """One pass over the platform and every live tenant. One tenant failing never stops the rest."""
    backend = backend or get_backend()
    result = FleetPass()
    ctx = RenderContext.from_settings()  # once per pass (the platform's render too), not once per tenant
    try:
        result.platform = reconcile.reconcile_platform(backend, ctx)
    except InfraError as exc:
        result.errors.append(f"platform: {exc}")
    except Exception as exc:  # the platform failing must not stop tenants from being repaired
        log.exception("fleet reconcile: platform failed")
        result.errors.append(f"platform: {type(exc).__name__}: {exc}")
    if not isinstance(backend, ComparesInSync):
        result.deferred = list(Tenant.objects.live().order_by("pk").values_list("pk", flat=True))
        return result
    dirty: list[int] = []  # in pk order, like `tenants`
    clean_ids: list[int] = []
    ctx_key = context_key(ctx, backend)
    seen: dict[bytes, Known] = {}
    # The cycle collector paused while the pass loads and checks the fleet: that part allocates millions of
    # objects that live until it ends (rows, views, keys), and each time the young objects outgrow a quarter
    # of the old ones the collector walks the whole heap again, finding next to nothing (at 10,000 tenants, 3
    # full collections of 0.6-0.8 s of wall each per pass at load 12, measured with `gc.callbacks`). Not
    # around the reconciles of changed tenants: those may create cyclic garbage.
    with gcpause.paused():
        # Not the applied object list: the pass never reads it, and at 10,000 tenants it is most of the rows; nor the
        # status fields (conditions, time stamps), which only a reconcile reads, from the row it locks and reloads.
        tenants = list(Tenant.objects.live().order_by("pk").defer(
            "applied_objects", "conditions", "created", "updated", "last_reconciled_at"))
        rows = {t.pk: t for t in tenants}
        views: dict[int, TenantView] = {}
        for chunk in _chunks(tenants, VIEW_CHUNK):
            try:
                views.update(reconcile.tenant_views(chunk))  # a few queries per chunk, not per tenant
            except Exception:
                log.exception("fleet reconcile: loading render inputs failed; reconciling tenants one by one")
        tokens = isinstance(backend, ChecksFingerprints)
        verdicts: dict[int, int | Known | None] = {}
        for tenant in tenants:
            view = views.get(tenant.pk)
            verdict: int | Known | None = None
            if view is not None and _needs_render(tenant):
                try:
                    verdict = (_known_applied(tenant, view, backend, ctx, ctx_key, seen) if tokens
                               else _clean_rendered(tenant, view, backend, ctx))
                except Exception:  # the reconcile below reports it on the tenant (and in `errors`)
                    log.exception("fleet reconcile: checking tenant %s failed", tenant.slug)
            verdicts[tenant.pk] = verdict
        pending = {pk: known for pk, known in verdicts.items() if isinstance(known, Known)}
        for (pk, known), ok in zip(pending.items(), _in_sync(backend, list(pending.values())), strict=True):
            verdicts[pk] = known.objects if ok else None
        for tenant in tenants:
            objects = verdicts[tenant.pk]
            if objects is None:
                dirty.append(tenant.pk)
            else:
                result.clean[tenant.slug] = objects  # type: ignore[assignment]
                clean_ids.append(tenant.pk)
    if clean_ids:
        _stamp_reconciled(clean_ids)
    batch = backend.batch if isinstance(backend, Batches) else None
    chunks = list(_chunks(dirty, CHUNK))
    with _prerendering(chunks, views, ctx, backend) as ahead:
        _reconcile_chunks(result, chunks, ahead, rows, views, backend, ctx, ctx_key, seen, batch, message)
    if isinstance(backend, Maintains):  # GitOps: index compaction and pack merging, off the event path
        try:
            backend.maintain()
        except InfraError:  # nothing is lost: the next pass tries again (and a commit repacks past a hard limit)
            log.warning("fleet reconcile: GitOps repository upkeep failed", exc_info=True)
    _KNOWN.clear()
    _KNOWN.update(seen)
    return result


def workers() -> int:
    """Worker processes rendering ahead on the cold path (GPUFLEET_RECONCILE_WORKERS >= 0; else one per core,
    at most 2, and none on a single core, where they would only take turns with the pass)."""
    configured = int(conf.RECONCILE_WORKERS)
    if configured >= 0:
        return configured
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(2, cores) if cores > 1 else 0


@contextmanager
def _prerendering(chunks: list[list[int]], views: dict[int, TenantView], ctx: RenderContext,
                  backend: Backend) -> Iterator[Callable[[int], dict[str, prerender.Prerendered]]]:
    """`ahead(i)`: chunk i rendered by a worker (by slug), the next chunks handed out meanwhile. Only worth
    forking for more than one chunk (the cold start, a platform-wide change); else `ahead` is always {}."""
    count = workers()
    if len(chunks) < 2 or count == 0 or not prerender.supported(backend):
        yield lambda index: {}
        return

    def chunk_views(index: int) -> list[TenantView]:
        return [views[pk] for pk in chunks[index] if pk in views]

    first = next((views[pk] for chunk in chunks for pk in chunk if pk in views), None)
    if first is not None:
        try:  # before forking: the validators and emitter memos are built once here, not once per worker
            prerender.prerender(first, ctx, backend)
        except Exception:  # noqa: S110 - only a warm-up; the reconcile reports this tenant's error
            pass
    with ExitStack() as stack:
        try:
            pool = stack.enter_context(prerender.workers(ctx, backend, count))
        except OSError:  # no fork (resource limits): the pass renders inline, as it always could
            log.exception("fleet reconcile: starting the render workers failed; rendering inline")
            yield lambda index: {}
            return
        submitted = 0

        def hand_out() -> None:
            nonlocal submitted
            while submitted < len(chunks) and pool.submit(submitted, chunk_views(submitted)):
                submitted += 1

        def ahead(index: int) -> dict[str, prerender.Prerendered]:
            nonlocal submitted
            if index >= submitted:
                # The pass caught up with the workers (both busy when this chunk's turn came to be handed
                # out): it renders this chunk inline now, so the chunk must never be handed out later --
                # a worker would render it for nothing, and every later chunk would queue behind it, so
                # the pass would go on rendering inline while the workers render what it already did.
                submitted = index + 1
                hand_out()
                return {}
            try:
                return pool.take(index)
            finally:
                hand_out()  # the worker just freed starts on the next chunk while this one is reconciled

        hand_out()
        yield ahead


def _reconcile_chunks(result: FleetPass, chunks: list[list[int]], ahead: Callable[[int], dict],
                      rows: dict[int, Tenant], views: dict[int, TenantView], backend: Backend,
                      ctx: RenderContext, ctx_key: str, seen: dict[bytes, Known], batch: Any,
                      message: str) -> None:
    for index, chunk in enumerate(chunks):
        try:
            pre = ahead(index)
        except Exception:  # a worker died: this chunk renders inline
            log.exception("fleet reconcile: a render worker failed; rendering the chunk inline")
            pre = {}
        scope: AbstractContextManager[None] = (
            batch(f"{message}: {len(chunk)} tenants") if batch else nullcontext()
        )
        written: list[int] = []  # tenants of this chunk whose files await the chunk's commit
        first = len(result.outcomes)
        try:  # the chunk's conditions in a few queries (each used only if its row did not change meanwhile)
            prepared = reconcile.prepare_conditions([rows[pk] for pk in chunk])
        except Exception:
            log.exception("fleet reconcile: preparing conditions failed; computing them tenant by tenant")
            prepared = {}
        try:
            with ExitStack() as scopes:
                # Exits last: the kept status writes and the locks outlast the chunk's commit.
                status = scopes.enter_context(chunk_status(chunk))
                for enter in registry.functions("chunk_scope"):  # e.g. placement status, written once per chunk
                    try:
                        scopes.enter_context(enter([rows[pk] for pk in chunk]))
                    except Exception:  # then its hooks read and write row by row, as outside a pass
                        log.exception("fleet reconcile: entering %r failed", enter)
                scopes.enter_context(scope)
                for tenant_id in chunk:
                    try:
                        hints = reconcile.ReconcileHints(ctx=ctx, view=views.get(tenant_id),
                                                         prepared=prepared.get(tenant_id),
                                                         pre=pre.get(rows[tenant_id].slug), chunk=status)
                        outcome = reconcile.reconcile_tenant(tenant_id, backend, hints)
                    except TransientError as exc:
                        result.retry.append(tenant_id)
                        result.errors.append(f"tenant {tenant_id}: {exc} (will retry)")
                        continue
                    except Exception as exc:  # a bug or bad row in one tenant must not stop the fleet
                        log.exception("fleet reconcile: tenant %s failed", tenant_id)
                        result.errors.append(f"tenant {tenant_id}: {type(exc).__name__}: {exc}")
                        continue
                    result.outcomes.append(outcome)
                    result.errors.extend(f"{outcome.tenant}: {problem}" for problem in outcome.problems)
                    if outcome.retry_after is not None:  # e.g. the repository was unwritable: retried soon
                        result.retry.append(tenant_id)
                    if outcome.result is not None and outcome.result.changed:
                        written.append(tenant_id)
        except Exception as exc:  # the chunk's one commit failed: its tenants are not applied after all
            log.exception("fleet reconcile: committing %d tenants failed", len(written))
            reconcile.mark_uncommitted(written, exc)
            result.errors.append(f"commit of {len(written)} tenants failed: {exc}")
            failed = set(written)
            result.outcomes = [o for o in result.outcomes if o.tenant not in _slugs(failed)]
            result.retry.extend(written)
        else:
            _remember(result.outcomes[first:], backend, ctx, ctx_key, seen)
