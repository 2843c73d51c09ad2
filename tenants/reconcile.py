"""Level-triggered reconcile of one tenant: load, render all, validate, apply (prune), record.

Never trusts the message that triggered it: it reads the row and acts on what it finds, so running
it twice, late or concurrently (serialised by a per-tenant lock) is harmless.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import transaction

from gpufleet import clock
from gpufleet.audit.record import record
from gpufleet.core import registry
from gpufleet.observability import metrics
from infra.backend import ApplyResult, Backend, KnowsCommitted, Publishes
from infra.errors import AwaitingPublication, InfraError, PermanentError, TransientError
from infra.manifests import ref

from . import secrets
from .actions import _condition
from .backends import get_backend, get_schema_registry
from .chunk_status import ChunkStatus
from .locks import tenant_lock
from .models import Phase, Tenant
from .prerender import Prerendered
from .prerender import target as placement_target
from .render import (
    Placed,
    RenderContext,
    TenantView,
    placed_digest,
    placements,
    platform_targets,
    render_placed,
    render_platform,
    with_platform_inputs,
)
from .teardown import run as teardown_tenant

log = logging.getLogger(__name__)
T = TypeVar("T")

SKIP_PHASES = {Phase.REQUESTED, Phase.REJECTED, Phase.DELETED}


@dataclass(frozen=True)
class Outcome:
    tenant: str
    phase: str
    result: ApplyResult | None = None
    problems: tuple[str, ...] = ()
    # The failure is one the task retries (InfraError.retry_after), though the status records it.
    retry_after: float | None = None
    # (view, [(owner on its host cluster, manifests)], digest) of a successful apply: the fleet pass remembers
    # what these inputs render, per placement.
    rendered: tuple[TenantView, list[tuple[str, list[dict]]], str] | None = field(
        default=None, compare=False, repr=False)
    # Rendered ahead (tenants.prerender): `rendered`'s placed list is empty and these are, per placement,
    # (owner on its host cluster, the backend's token), with the object count.
    tokens: tuple[int, tuple[tuple[str, object], ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def summary(self) -> str:
        if self.problems:
            return f"{self.tenant}: {self.phase}: " + "; ".join(self.problems)
        if self.result is None:
            return f"{self.tenant}: {self.phase} (nothing to do)"
        return f"{self.tenant}: {self.phase} ({self.result.summary()})"


def tenant_view(tenant: Tenant) -> TenantView:
    """Everything render needs about a tenant: `tenant_views` of a batch of one."""
    return tenant_views([tenant])[tenant.pk]


# While `tenant_views` or one tenant's reconcile runs: rows its loaders share (the render's view, the
# scheduling inputs and the GPU-modes condition all read the tenant's isolation rows), by the loader's own
# key. Empty outside them, so nothing read for one call is ever served to another.
_SHARED: ContextVar[dict[object, object] | None] = ContextVar("tenant_views_shared", default=None)


@contextmanager
def shared_scope() -> Iterator[None]:
    """Within the block, `shared_rows` serves each key's rows once (a fresh scope: nothing from outside)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def ids_in(ids: list[int]) -> Any:
    """The right-hand side of `tenant_id__in` for many ids: ONE array parameter
    (`IN (SELECT unnest(%s::bigint[]))`): a list of 500 ids is 500 placeholders that Django prepares and
    psycopg splices one by one -- a fifth of a no-op pass at 10,000 tenants."""
    from django.db.models.expressions import RawSQL

    return RawSQL("SELECT unnest(%s::bigint[])", ["{" + ",".join(str(int(i)) for i in ids) + "}"])


def shared_rows(key: object, load: Callable[[], T]) -> T:
    """`load()`, computed once per `tenant_views` call or single reconcile for this key (every call outside
    one)."""
    shared = _SHARED.get()
    if shared is None:
        return load()
    if key not in shared:
        shared[key] = load()
    return shared[key]  # type: ignore[return-value]


def tenant_views(tenants: list[Tenant]) -> dict[int, TenantView]:
    """The view of each tenant, every field filled by the registry's `view_loader` contributions: batch
    loaders, so a fleet pass's thousand tenants are a few queries, not thousands (tests/gitops/test_fleet.py
    checks a batch of many gives what batches of one do, value for value and byte for byte)."""
    fields: dict[int, dict[str, object]] = {t.pk: {} for t in tenants}
    # Inside one tenant's reconcile (a batch of one), its scope: the condition providers after the apply read
    # the same isolation rows. Else a scope of its own.
    with shared_scope() if _SHARED.get() is None else nullcontext():
        for loader in registry.contributions("view_loader"):
            loaded = loader.fn(tenants)
            for tenant in tenants:
                fields[tenant.pk][loader.name] = loaded[tenant.pk]
    return {t.pk: TenantView.of(t, **fields[t.pk]) for t in tenants}


# The registry's `condition` contributions: batch functions (tenants -> {pk: condition dict}) whose conditions
# a successful apply records on the tenant. A fleet pass computes them per chunk (`prepare_conditions`), so
# a cold start of thousands of tenants is a few queries per chunk, not several per tenant (isolation's
# GpuModesAdmitted: five); a single reconcile asks for a batch of one.


@dataclass(frozen=True)
class Prepared:
    """Conditions computed in bulk for a fleet pass from the tenant's row as it was loaded (its generation
    and trust level): used only if the locked row still has them (a spec change bumps the generation)."""

    generation: int
    trust_level: str
    conditions: dict = field(default_factory=dict)  # provider (the contributed function) -> its condition


def prepare_conditions(tenants: list[Tenant]) -> dict[int, Prepared]:
    """`Prepared` for each tenant, with every `condition` contribution's."""
    out = {t.pk: Prepared(t.generation, t.trust_level) for t in tenants}
    for provide in registry.functions("condition"):
        for pk, condition in provide(tenants).items():
            out[pk].conditions[provide] = condition
    return out


@dataclass(frozen=True)
class ReconcileHints:
    """What a fleet-wide pass (tenants.fleet) already loaded or holds for one tenant's reconcile. Each is a
    shortcut only: used if still valid, else the reconcile does that step itself, so no hints (`NO_HINTS`,
    a task's reconcile) gives the same outcome."""

    # Platform-wide render inputs (the catalog...), loaded once per pass: saves reading them per tenant.
    ctx: RenderContext | None = None
    # The view built by the chunk's batch loaders: saves the loaders' queries for this tenant. Used only if
    # the locked row still matches it (a spec change bumps `generation`).
    view: TenantView | None = None
    # Conditions computed in bulk for the chunk: saves each provider's per-tenant queries. Used only if the
    # locked row still has the generation and trust level they were computed from.
    prepared: Prepared | None = None
    # The render of the view done ahead by a worker (tenants.prerender): saves rendering, validating and
    # serialising. Used only if it is of the view and placements found here, and not for a teardown.
    pre: Prerendered | None = None
    # The chunk's shared status (tenants.chunk_status): the tenant's lock may be held and its row read for it
    # already (saves a lock and a SELECT), and its final status write is kept for the chunk's one UPDATE.
    chunk: ChunkStatus | None = None


NO_HINTS = ReconcileHints()


def desired_manifests(tenant: Tenant, ctx: RenderContext | None = None) -> list[dict]:
    """Everything the tenant owns, on every host cluster it is placed on (home first)."""
    rendered = render_placed(tenant_view(tenant), ctx or RenderContext.from_settings(tenants_only=True))
    return [m for _, objects in rendered for m in objects]


def _set_status(tenant: Tenant, *, phase: str, conditions: list[dict], **fields: object) -> None:
    # Only status fields: a spec change made meanwhile bumped `generation`, which we must not clobber.
    Tenant.objects.filter(pk=tenant.pk).update(phase=phase, conditions=conditions, **fields)


def _merge_condition(conditions: list[dict], new: dict) -> list[dict]:
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old and old.get("status") == new["status"] and old.get("reason") == new["reason"]:
        new = {**new, "lastTransitionTime": old.get("lastTransitionTime", new["lastTransitionTime"])}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def reconcile_tenant(tenant_id: int, backend: Backend | None = None, hints: ReconcileHints = NO_HINTS) -> Outcome:
    """Reconcile one tenant (`_reconcile_tenant`), timed by outcome for `/metrics`."""
    started = time.perf_counter()
    try:
        outcome = _reconcile_tenant(tenant_id, backend, hints)
    except InfraError as exc:
        reason = exc.reason or type(exc).__name__
        metrics.observe_reconcile(f"error:{reason}", time.perf_counter() - started, reason)
        raise
    except Exception:
        metrics.observe_reconcile("error:Exception", time.perf_counter() - started, "Exception")
        raise
    failed = outcome.phase == Phase.FAILED or bool(outcome.problems)
    metrics.observe_reconcile(str(outcome.phase), time.perf_counter() - started, "Failed" if failed else "")
    return outcome


def _reconcile_tenant(tenant_id: int, backend: Backend | None = None, hints: ReconcileHints = NO_HINTS) -> Outcome:
    """`hints`: what a fleet-wide pass (tenants.fleet) loaded in bulk or rendered ahead (ReconcileHints),
    each used only while still valid."""
    ctx, view, prepared, pre, chunk = hints.ctx, hints.view, hints.prepared, hints.pre, hints.chunk
    backend = backend or get_backend()
    held, tenant = chunk.row(tenant_id) if chunk is not None else (False, None)
    with nullcontext() if held else tenant_lock(tenant_id), shared_scope():
        if not held:
            tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:
            return Outcome(str(tenant_id), "missing")
        if tenant.phase in SKIP_PHASES:
            return Outcome(tenant.slug, tenant.phase)
        generation = tenant.generation
        if view is None or not view.of_row(tenant):
            view = tenant_view(tenant)
        # Platform-wide inputs (the catalog): loaded once; not those only the platform's objects read.
        ctx = ctx or RenderContext.from_settings(tenants_only=True)
        if pre is not None and pre.view == view and tenant.phase != Phase.DEPROVISIONING:
            # The render was done ahead from this very view: only the placements (which carry the narrowed
            # contexts the hooks and the teardown read) are taken here, and must be the ones it rendered.
            rendered = [(p, []) for p in placements(view, ctx)]
            if tuple(placement_target(p) for p, _ in rendered) != pre.targets:
                pre = None
        else:
            pre = None
        if pre is None:
            try:
                rendered = render_placed(view, ctx)  # per host cluster the tenant is placed on
                manifests = [m for _, objects in rendered for m in objects]
                problems = tuple(str(p) for p in get_schema_registry().validate(manifests)[:20])
            except Exception as exc:  # nothing rendered: no placement to mark, but no Ready=True left either
                _unreconciled(tenant, [], exc)
                raise
        else:
            manifests, problems = [], pre.problems
        if problems:
            # Never write an object the cluster would reject or silently prune.
            messages = problems
            cond = _condition("Ready", "False", "InvalidManifest", "; ".join(messages))
            _finish(tenant, Phase.FAILED, _merge_condition(tenant.conditions, cond), "tenant.failed")
            return Outcome(tenant.slug, Phase.FAILED, problems=messages)
        if tenant.phase == Phase.APPROVED:
            _set_status(tenant, phase=Phase.PROVISIONING, conditions=tenant.conditions)
        teardown = tenant.phase == Phase.DEPROVISIONING
        delivering = False  # set once apply_placed / the teardown reports each placement itself
        verb = "deprovision" if teardown else "reconcile"
        message = f"tenant {tenant.slug}: {verb} generation {generation}"
        try:
            if tenant.phase == Phase.APPROVED and _platform_missing(backend, ctx):
                # A first tenant needs the platform's shared objects (chart repositories, flavors) too.
                try:
                    reconcile_platform(backend, ctx)
                except InfraError:
                    if len(platform_targets(ctx)) == 1:
                        raise
                    # Several clusters: one that failed fails this tenant's placement there, if it has one, on
                    # its own (and is marked); the tenant's other clusters go on.
                    log.warning("tenant %s: the platform failed on some cluster", tenant.slug, exc_info=True)
            ensure_layout(backend, ctx)
            delivering = True
            if teardown:
                # Ordered and resumable: stop admission, vCluster, policies, OpenBao, namespace last.
                result = teardown_tenant(tenant, backend, view, ctx, message, [p for p, _ in rendered])
            else:
                result = apply_placed(backend, tenant, rendered, message, files=pre.files if pre else None)
                tenant.conditions = _merge_condition(tenant.conditions, _secrets_condition(tenant.slug, backend))
                if prepared is not None and (prepared.generation, prepared.trust_level) != (
                        tenant.generation, tenant.trust_level):
                    prepared = None
                for provide in registry.functions("condition"):  # e.g. isolation's GpuModesAdmitted
                    condition = prepared.conditions.get(provide) if prepared is not None else None
                    tenant.conditions = _merge_condition(tenant.conditions,
                                                         condition or provide([tenant])[tenant.pk])
            for placed, _ in rendered:
                _require_published(backend, placed.owner(tenant.owner))
        except TransientError as exc:
            cond = _condition("Ready", "False", exc.reason or "Retrying", str(exc))
            _set_status(tenant, phase=_current_phase(tenant), conditions=_merge_condition(tenant.conditions, cond))
            raise
        except PermanentError as exc:
            cond = _condition("Ready", "False", exc.reason or "ApplyFailed", str(exc))
            # A failed teardown stays deprovisioning (FAILED is live: it would re-provision the tenant).
            failed = Phase.DEPROVISIONING if teardown else Phase.FAILED
            _finish(tenant, failed, _merge_condition(tenant.conditions, cond), "tenant.failed")
            return Outcome(tenant.slug, failed, problems=(str(exc),), retry_after=exc.retry_after)
        except Exception as exc:
            # Not an adapter's error: a bug, or a configuration the backend cannot use (a cluster folder git
            # refuses). The status must not keep claiming the previous generation's success: Ready=False on
            # the tenant, Reconciled=False on the placements not reported yet; then raise as before (the task
            # and the fleet pass log it and try again).
            _unreconciled(tenant, [p for p, _ in rendered] if not delivering else [], exc)
            raise
        if teardown:
            phase, cond = Phase.DELETED, _condition("Ready", "False", "Deleted", "all owned objects were pruned")
        elif tenant.phase == Phase.SUSPENDED:
            phase, cond = Phase.SUSPENDED, _condition("Ready", "False", "Suspended", "GPU admission stopped")
        else:
            phase, cond = Phase.READY, _condition("Ready", "True", "Applied", result.summary())
        applied = pre.digest if pre is not None else placed_digest(rendered)
        keys = list(pre.keys) if pre is not None else list(dict.fromkeys(ref(m).key for m in manifests))
        conditions = _merge_condition(tenant.conditions, cond)
        fields = {"observed_generation": generation, "applied_digest": applied, "applied_objects": keys,
                  "last_reconciled_at": clock.now()}
        if chunk is None or not chunk.defer(tenant, phase, conditions, fields):
            _finish(tenant, phase, conditions, f"tenant.{phase}", **fields)
        if pre is not None:
            owners = tuple(zip((p.owner(tenant.owner) for p, _ in rendered), pre.tokens, strict=True))
            return Outcome(tenant.slug, phase, result, rendered=(view, [], applied), tokens=(pre.objects, owners))
        placed = [(p.owner(tenant.owner), objects) for p, objects in rendered]
        return Outcome(tenant.slug, phase, result, rendered=None if teardown else (view, placed, applied))


RECONCILE_ERROR = "ReconcileError"


def _unexpected(exc: Exception) -> PermanentError:
    """An exception that is not an InfraError, as the error a status shows (reason ReconcileError)."""
    error = PermanentError(f"{type(exc).__name__}: {exc}")
    error.reason = RECONCILE_ERROR
    return error


def _unreconciled(tenant: Tenant, unreported: list[Placed], exc: Exception) -> None:
    """Ready=False (ReconcileError) on the tenant, its phase kept as a retry would, and the failed
    placements in `unreported` marked Reconciled=False, after a reconcile raised an unexpected exception."""
    error = _unexpected(exc)
    for placed in unreported:
        _report(tenant, placed, error)
    cond = _condition("Ready", "False", RECONCILE_ERROR, f"generation {tenant.generation}: {error}")
    _set_status(tenant, phase=_current_phase(tenant), conditions=_merge_condition(tenant.conditions, cond))


def _report(tenant: Tenant, placed: Placed, error: InfraError | None) -> None:
    """How delivering to one host cluster went, to the registry's `placement_status` contributions (the
    scheduling app writes the placement's condition and the cluster's reachability)."""
    if not placed.cluster:
        return
    for hook in registry.functions("placement_status"):
        hook(tenant, placed, error)


def apply_placed(backend: Backend, tenant: Tenant, rendered: list[tuple[Placed, list[dict]]],
                 message: str, *, files: tuple[dict[str, bytes], ...] | None = None) -> ApplyResult:
    """Apply the tenant's objects on every host cluster it is placed on. A cluster that fails (unreachable,
    or it rejects an object) is marked on that placement and does not stop the others; the first error is
    raised once every cluster was tried, so the tenant is retried (transient) or failed (permanent).
    `files`: per placement, the objects already serialised (tenants.prerender) for `backend.apply_files`."""
    results: list[ApplyResult] = []
    errors: list[InfraError] = []
    unexpected: Exception | None = None
    for i, (placed, objects) in enumerate(rendered):
        try:
            owner = placed.owner(tenant.owner)
            if files is not None:
                results.append(backend.apply_files(owner, files[i], message=message))  # type: ignore[attr-defined]
            else:
                results.append(backend.apply(owner, objects, message=message))
        except InfraError as exc:
            _report(tenant, placed, exc)
            if len(rendered) == 1:
                raise
            errors.append(exc)
            continue
        except Exception as exc:  # not an adapter's error (e.g. a cluster folder git refuses): marked all the same
            _report(tenant, placed, _unexpected(exc))
            if len(rendered) == 1:
                raise
            unexpected = unexpected or exc
            continue
        _report(tenant, placed, None)
    if unexpected is not None:  # every cluster was tried; the reconcile reports it on the tenant
        raise unexpected
    if errors:
        raise _combined(errors, len(rendered))
    return results[0] if len(results) == 1 else _merge_results(results)


def _combined(errors: list[InfraError], clusters: int) -> InfraError:
    """One error for the task: transient if the first was (retry with its delay), with its reason."""
    first = errors[0]
    text = f"{len(errors)} of {clusters} clusters failed: " + "; ".join(str(e) for e in errors)
    combined: InfraError = (TransientError(text, delay=first.delay) if isinstance(first, TransientError)
                            else PermanentError(text))
    combined.reason = first.reason or type(first).__name__
    combined.retry_after = first.retry_after
    return combined


def _merge_results(results: list[ApplyResult]) -> ApplyResult:
    return ApplyResult(
        created=[k for r in results for k in r.created], updated=[k for r in results for k in r.updated],
        unchanged=[k for r in results for k in r.unchanged], pruned=[k for r in results for k in r.pruned],
        revision=next((r.revision for r in reversed(results) if r.revision), None),
        drifted=[k for r in results for k in r.drifted],
    )


def _require_published(backend: Backend, owner: str) -> None:
    """A tenant is Ready only once the cluster can see its objects: with the GitOps backend and push
    enabled, once the commit holding its files is on the remote (else retried: AwaitingPush)."""
    why = backend.unpublished(owner) if isinstance(backend, Publishes) else None
    if why:
        raise AwaitingPublication(why, delay=15)


def mark_uncommitted(tenant_ids: list[int], error: Exception) -> None:
    """A batch's commit failed after its tenants were recorded as applied: take that back on each, so
    no status claims what git does not hold (the next pass reconciles them again)."""
    reason = getattr(error, "reason", "") or "CommitFailed"
    cond = _condition("Ready", "False", reason, f"the commit holding this tenant's files failed: {error}")
    for tenant in Tenant.objects.filter(pk__in=tenant_ids):
        phase = {Phase.DELETED: Phase.DEPROVISIONING}.get(tenant.phase, Phase.FAILED)
        _finish(tenant, phase, _merge_condition(tenant.conditions, cond), "tenant.failed")


def _secrets_condition(slug: str, backend: Backend) -> dict:
    """OpenBao step (tenants.secrets); errors propagate as Transient/PermanentError like apply's."""
    status, reason, text = secrets.ensure(slug, backend)
    return _condition(secrets.CONDITION, status, reason, text)


def _current_phase(tenant: Tenant) -> str:
    return Phase.PROVISIONING if tenant.phase == Phase.APPROVED else tenant.phase


def _finish(tenant: Tenant, phase: str, conditions: list[dict], action: str, **fields: object) -> None:
    """Record status; a phase change is an audited event (actor: the task)."""
    with transaction.atomic():
        _set_status(tenant, phase=phase, conditions=conditions, **fields)
        if phase != tenant.phase:
            before = tenant.snapshot()
            tenant.refresh_from_db()
            record(action, tenant, before=before, after=tenant.snapshot(), tenant_slug=tenant.slug)


def reconcile_platform(backend: Backend | None = None, ctx: RenderContext | None = None) -> ApplyResult:
    """The platform's cluster-wide objects on every host cluster (each its own flavors and node pools). One
    cluster failing does not stop the others; its error is raised once all were tried."""
    backend = backend or get_backend()
    ctx = with_platform_inputs(ctx or RenderContext.from_settings())
    ensure_layout(backend, ctx)
    targets = [(t, render_platform(t.ctx)) for t in platform_targets(ctx)]
    problems = get_schema_registry().validate([m for _, objects in targets for m in objects])
    if problems:
        raise PermanentError("platform manifests are invalid: " + "; ".join(map(str, problems[:20])))
    results: list[ApplyResult] = []
    errors: list[InfraError] = []
    for target, objects in targets:
        try:
            results.append(backend.apply(target.owner("platform"), objects,
                                         message="platform: reconcile cluster-wide objects"))
        except InfraError as exc:
            if len(targets) == 1:
                raise
            errors.append(exc)
            for hook in registry.functions("platform_status"):  # how delivering to each cluster went
                hook(target, exc)
            continue
        for hook in registry.functions("platform_status"):
            hook(target, None)
    if errors:
        raise _combined(errors, len(targets))
    return results[0] if len(results) == 1 else _merge_results(results)


def _platform_missing(backend: Backend, ctx: RenderContext) -> bool:
    """Might some host cluster lack the platform's shared objects? Only then does an approve apply them: the
    platform's render lists every tenant's ClusterQueue (fleetops), so at 10,000 tenants re-applying it made
    each approve cost what the fleet costs; keeping it current is the periodic pass's job (and catalog
    changes enqueue one). A backend that cannot tell cheaply (no `has_committed`) is always asked to apply."""
    if not isinstance(backend, KnowsCommitted):
        return True
    try:
        return not backend.has_committed([target.owner("platform") for target in platform_targets(ctx)])
    except InfraError:  # the platform's own apply reports (or repairs) what is wrong with the repository
        return True


def ensure_layout(backend: Backend, ctx: RenderContext) -> None:
    """GitOps: a repository still in the root layout of a single-cluster installation (`platform/`,
    `tenants/`) moves to the tree of the cluster those objects belong to -- the one whose objects go to the
    root no longer (`default` after migration scheduling 0008) -- in one commit of pure renames."""
    if backend.name != "gitops":
        return
    from infra.gitops.layout import has_root_layout, move_root_layout

    if not has_root_layout(backend.path):  # type: ignore[attr-defined]
        return
    targets = platform_targets(ctx)
    tree = targets[0].tree if len(targets) == 1 else next((t.tree for t in targets if t.cluster == "default"), "")
    revision = move_root_layout(backend, tree)  # type: ignore[arg-type]
    if revision:
        log.info("moved the root layout to %s/ in %s", tree, revision)
