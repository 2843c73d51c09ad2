"""Level-triggered reconcile of one tenant: load, render all, validate, apply (prune), record.

Never trusts the message that triggered it: it reads the row and acts on what it finds, so running
it twice, late or concurrently (serialised by a per-tenant lock) is harmless.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.db import transaction

from gpufleet import clock
from gpufleet.audit.record import record
from gpufleet.observability import metrics
from infra.backend import ApplyResult, Backend
from infra.errors import AwaitingPublication, InfraError, PermanentError, TransientError
from infra.manifests import digest, ref

from . import secrets
from .actions import _condition
from .backends import get_backend, get_schema_registry
from .locks import tenant_lock
from .models import Phase, Tenant
from .render import RenderContext, TenantView, render_platform, render_tenant
from .teardown import run as teardown_tenant

log = logging.getLogger(__name__)

SKIP_PHASES = {Phase.REQUESTED, Phase.REJECTED, Phase.DELETED}


@dataclass(frozen=True)
class Outcome:
    tenant: str
    phase: str
    result: ApplyResult | None = None
    problems: tuple[str, ...] = ()
    # (view, manifests, digest) of a successful apply: the fleet pass remembers what these inputs render.
    rendered: tuple[TenantView, list[dict], str] | None = field(default=None, compare=False, repr=False)

    @property
    def summary(self) -> str:
        if self.problems:
            return f"{self.tenant}: {self.phase}: " + "; ".join(self.problems)
        if self.result is None:
            return f"{self.tenant}: {self.phase} (nothing to do)"
        return f"{self.tenant}: {self.phase} ({self.result.summary()})"


def tenant_view(tenant: Tenant) -> TenantView:
    """Everything render needs about a tenant; other apps add their rows via `view_extras`."""
    extra: dict[str, object] = {}
    for contribute in VIEW_EXTRAS:
        extra.update(contribute(tenant))
    return TenantView.of(tenant, **extra)


# Functions (tenant -> dict) that load the per-tenant data other apps render (quotas, endpoints...).
VIEW_EXTRAS: list = []

# Batch versions for fleet-wide passes (tenants.fleet), so a thousand tenants are a few queries, not
# thousands: VIEW_EXTRAS_MANY[loader] = fn(tenants) -> {tenant.pk: what loader(tenant) returns}.
# tests/gitops/test_fleet.py checks every registered pair gives identical results and renders.
VIEW_EXTRAS_MANY: dict = {}


def tenant_views(tenants: list[Tenant]) -> dict[int, TenantView]:
    """`tenant_view` for many tenants, using batch loaders where registered."""
    extras: dict[int, dict[str, object]] = {t.pk: {} for t in tenants}
    for contribute in VIEW_EXTRAS:
        many = VIEW_EXTRAS_MANY.get(contribute)
        loaded = many(tenants) if many else {t.pk: contribute(t) for t in tenants}
        for tenant in tenants:
            extras[tenant.pk].update(loaded[tenant.pk])
    return {t.pk: TenantView.of(t, **extras[t.pk]) for t in tenants}


# Functions (tenant -> condition dict) whose conditions a successful apply records on the tenant.
CONDITION_PROVIDERS: list = []


def desired_manifests(tenant: Tenant, ctx: RenderContext | None = None) -> list[dict]:
    return render_tenant(tenant_view(tenant), ctx or RenderContext.from_settings())


def _set_status(tenant: Tenant, *, phase: str, conditions: list[dict], **fields: object) -> None:
    # Only status fields: a spec change made meanwhile bumped `generation`, which we must not clobber.
    Tenant.objects.filter(pk=tenant.pk).update(phase=phase, conditions=conditions, **fields)


def _merge_condition(conditions: list[dict], new: dict) -> list[dict]:
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old and old.get("status") == new["status"] and old.get("reason") == new["reason"]:
        new = {**new, "lastTransitionTime": old.get("lastTransitionTime", new["lastTransitionTime"])}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def reconcile_tenant(
    tenant_id: int, backend: Backend | None = None, *, ctx: RenderContext | None = None,
    view: TenantView | None = None,
) -> Outcome:
    """Reconcile one tenant (`_reconcile_tenant`), timed by outcome for `/metrics`."""
    started = time.perf_counter()
    try:
        outcome = _reconcile_tenant(tenant_id, backend, ctx=ctx, view=view)
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


def _reconcile_tenant(
    tenant_id: int, backend: Backend | None = None, *, ctx: RenderContext | None = None,
    view: TenantView | None = None,
) -> Outcome:
    """`ctx` and `view` let a fleet-wide pass (tenants.fleet) load render inputs in bulk; `view` is
    used only if the locked row still matches it (spec changes bump `generation`), else reloaded."""
    backend = backend or get_backend()
    with tenant_lock(tenant_id):
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:
            return Outcome(str(tenant_id), "missing")
        if tenant.phase in SKIP_PHASES:
            return Outcome(tenant.slug, tenant.phase)
        generation = tenant.generation
        if view is None or view != TenantView.of(tenant, **view.extra):
            view = tenant_view(tenant)
        ctx = ctx or RenderContext.from_settings()  # platform-wide inputs (the catalog): loaded once
        manifests = render_tenant(view, ctx)
        problems = get_schema_registry().validate(manifests)
        if problems:
            # Never write an object the cluster would reject or silently prune.
            messages = tuple(str(p) for p in problems[:20])
            cond = _condition("Ready", "False", "InvalidManifest", "; ".join(messages))
            _finish(tenant, Phase.FAILED, _merge_condition(tenant.conditions, cond), "tenant.failed")
            return Outcome(tenant.slug, Phase.FAILED, problems=messages)
        if tenant.phase == Phase.APPROVED:
            _set_status(tenant, phase=Phase.PROVISIONING, conditions=tenant.conditions)
        teardown = tenant.phase == Phase.DEPROVISIONING
        verb = "deprovision" if teardown else "reconcile"
        message = f"tenant {tenant.slug}: {verb} generation {generation}"
        try:
            if tenant.phase == Phase.APPROVED:
                # A first tenant needs the platform's shared objects (chart repositories, flavors) too.
                reconcile_platform(backend, ctx)
            if teardown:
                # Ordered and resumable: stop admission, vCluster, policies, OpenBao, namespace last.
                result = teardown_tenant(tenant, backend, view, ctx, message)
            else:
                result = backend.apply(tenant.owner, manifests, message=message)
                tenant.conditions = _merge_condition(tenant.conditions, _secrets_condition(tenant.slug, backend))
                for provide in CONDITION_PROVIDERS:  # e.g. isolation's GpuModesAdmitted
                    tenant.conditions = _merge_condition(tenant.conditions, provide(tenant))
            _require_published(backend, tenant.owner)
        except TransientError as exc:
            cond = _condition("Ready", "False", exc.reason or "Retrying", str(exc))
            _set_status(tenant, phase=_current_phase(tenant), conditions=_merge_condition(tenant.conditions, cond))
            raise
        except PermanentError as exc:
            cond = _condition("Ready", "False", exc.reason or "ApplyFailed", str(exc))
            # A failed teardown stays deprovisioning (FAILED is live: it would re-provision the tenant).
            failed = Phase.DEPROVISIONING if teardown else Phase.FAILED
            _finish(tenant, failed, _merge_condition(tenant.conditions, cond), "tenant.failed")
            return Outcome(tenant.slug, failed, problems=(str(exc),))
        if teardown:
            phase, cond = Phase.DELETED, _condition("Ready", "False", "Deleted", "all owned objects were pruned")
        elif tenant.phase == Phase.SUSPENDED:
            phase, cond = Phase.SUSPENDED, _condition("Ready", "False", "Suspended", "GPU admission stopped")
        else:
            phase, cond = Phase.READY, _condition("Ready", "True", "Applied", result.summary())
        applied = digest(manifests)
        _finish(
            tenant,
            phase,
            _merge_condition(tenant.conditions, cond),
            f"tenant.{phase}",
            observed_generation=generation,
            applied_digest=applied,
            applied_objects=[ref(m).key for m in manifests],
            last_reconciled_at=clock.now(),
        )
        return Outcome(tenant.slug, phase, result, rendered=None if teardown else (view, manifests, applied))


def _require_published(backend: Backend, owner: str) -> None:
    """A tenant is Ready only once the cluster can see its objects: with the GitOps backend and push
    enabled, once the commit holding its files is on the remote (else retried: AwaitingPush)."""
    unpublished = getattr(backend, "unpublished", None)
    why = unpublished(owner) if unpublished else None
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
    backend = backend or get_backend()
    manifests = render_platform(ctx or RenderContext.from_settings())
    problems = get_schema_registry().validate(manifests)
    if problems:
        raise PermanentError("platform manifests are invalid: " + "; ".join(map(str, problems[:20])))
    return backend.apply("platform", manifests, message="platform: reconcile cluster-wide objects")
