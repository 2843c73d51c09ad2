"""Ordered, resumable deprovisioning of one tenant.

Steps (Kubernetes backend, where the API really deletes things in the order we ask):
1. stop-admission             re-apply the tenant as suspended: GPU quota 0, queues stopped
2. delete-vcluster            prune the vCluster HelmRelease; wait until it is gone
3. prune-policies-and-queues  prune everything but the namespace (reverse KIND_ORDER); wait
4. revoke-secrets             delete the OpenBao role, policy and every secret
5. delete-namespace           prune the namespace last; wait until it is gone

A GitOps backend only writes the desired state; Argo CD / Flux delete from the cluster in their
own order. There one commit removes everything, then OpenBao access is revoked.

Progress lives in the tenant's `Deprovisioning` condition (`step` = the last step done), written
as soon as a step finishes, outside any transaction: a crash (worker killed, exception) at any
step leaves the record of what is done, and the next reconcile resumes with the step after it.
Every step is idempotent, so redoing the interrupted one is harmless. "Still deleting" (finalizers)
is a TransientError: the task retries with backoff, no sleeping in the worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gpufleet import clock
from infra.backend import ApplyResult, Backend, OrderedTeardown, PrunesSelectively
from infra.errors import PermanentError, TransientError
from infra.manifests import Manifest, ObjectRef

from . import secrets
from .models import Phase, Tenant
from .render import Placed, RenderContext, TenantView, render_tenant

CONDITION = "Deprovisioning"
VCLUSTER_KINDS = {"HelmRelease"}
WAIT_DELAY = 10.0


@dataclass
class Teardown:
    tenant: Tenant
    backend: Backend
    view: TenantView
    ctx: RenderContext
    message: str
    results: list[ApplyResult] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    # The owner with its host cluster's prefix ('' = the tenant's plain owner, the root layout).
    placed_owner: str = ""

    @property
    def owner(self) -> str:
        return self.placed_owner or self.tenant.owner

    def suspended(self) -> list[Manifest]:
        """The tenant's objects as a suspended tenant has them (admission stopped)."""
        return render_tenant(dataclasses.replace(self.view, phase=Phase.SUSPENDED), self.ctx)

    def apply(self, manifests: list[Manifest], step: str) -> None:
        self.results.append(self.backend.apply(self.owner, manifests, message=f"{self.message}: {step}"))

    def prune(self, select: Callable[[ObjectRef], bool] | None, step: str) -> None:
        """Delete without writing anything (ordered backends offer `prune`); else apply the empty set."""
        if not isinstance(self.backend, PrunesSelectively):
            if select is not None:
                raise PermanentError(f"{step}: backend {self.backend.name} cannot delete selectively")
            self.apply([], step)
            return
        self.results.append(self.backend.prune(self.owner, select))

    def wait_until_gone(self, kinds: set[str] | None, step: str) -> None:
        """Requeue while objects of `kinds` (None: any) still exist (finalizers still running)."""
        left = [key for key in self.backend.owned(self.owner) if kinds is None or key.split(".", 1)[0] in kinds]
        if left:
            raise TransientError(f"{step}: waiting for {', '.join(left[:5])} to be deleted", WAIT_DELAY)


def stop_admission(t: Teardown) -> None:
    if not t.backend.owned(t.owner):
        # Never provisioned (or already gone): applying now would create objects only to delete them.
        t.notes.append("nothing was provisioned")
        return
    try:
        t.apply(t.suspended(), "stop-admission")
    except PermanentError as exc:
        # Best effort: the queues and quotas are deleted two steps later anyway. An object the API
        # now rejects must not keep a tenant from being torn down; the note stays on the condition.
        t.notes.append(f"admission not stopped ({exc}); deleting anyway")


def delete_vcluster(t: Teardown) -> None:
    t.prune(lambda obj: obj.kind in VCLUSTER_KINDS, "delete-vcluster")
    t.wait_until_gone(VCLUSTER_KINDS, "delete-vcluster")


def prune_policies_and_queues(t: Teardown) -> None:
    t.prune(lambda obj: obj.kind != "Namespace", "prune-policies-and-queues")
    left = [key for key in t.backend.owned(t.owner) if not key.startswith("Namespace.")]
    if left:
        raise TransientError(f"prune-policies-and-queues: waiting for {', '.join(left[:5])}", WAIT_DELAY)


def revoke_secrets(t: Teardown) -> None:
    status, reason, message = secrets.revoke(t.tenant.slug)
    _record(t.tenant, {"type": secrets.CONDITION, "status": status, "reason": reason, "message": message})


def delete_namespace(t: Teardown) -> None:
    t.prune(None, "delete-namespace")
    t.wait_until_gone(None, "delete-namespace")


def prune_all(t: Teardown) -> None:
    t.apply([], "prune-all")


Step = Callable[[Teardown], None]
# Looked up by name at run time, so a test can make one step crash (by swapping the whole mapping: it is
# read-only, like every module-level table of callables, see tests/core/test_registry.py).
STEPS: Mapping[str, Step] = MappingProxyType({
    "stop-admission": stop_admission,
    "delete-vcluster": delete_vcluster,
    "prune-policies-and-queues": prune_policies_and_queues,
    "revoke-secrets": revoke_secrets,
    "delete-namespace": delete_namespace,
    "prune-all": prune_all,
})
ORDERED_PLAN = ["stop-admission", "delete-vcluster", "prune-policies-and-queues", "revoke-secrets", "delete-namespace"]
GITOPS_PLAN = ["prune-all", "revoke-secrets"]


def plan_for(backend: Backend) -> list[str]:
    return ORDERED_PLAN if isinstance(backend, OrderedTeardown) and backend.ordered_teardown else GITOPS_PLAN


def done_steps(tenant: Tenant, plan: list[str]) -> int:
    """How many steps of `plan` the recorded progress says are done."""
    cond = tenant.condition(CONDITION) or {}
    last = cond.get("step")
    return plan.index(last) + 1 if last in plan else 0


# Steps that act on the tenant as a whole (OpenBao), not on each host cluster it is placed on.
ONCE = {"revoke-secrets"}


def run(tenant: Tenant, backend: Backend, view: TenantView, ctx: RenderContext, message: str,
        places: list[Placed] | None = None) -> ApplyResult:
    """Run the remaining steps -- each on every host cluster the tenant is placed on, so the namespace goes
    last everywhere -- and return the apply results folded into one."""
    plan = plan_for(backend)
    teardowns = [
        Teardown(tenant, backend, p.view or view, p.ctx, message, placed_owner=p.owner(tenant.owner))
        for p in (places or [Placed("", "", view, ctx)])
    ]
    start = done_steps(tenant, plan)
    for index in range(start, len(plan)):
        name = plan[index]
        for teardown in teardowns[:1] if name in ONCE else teardowns:
            STEPS[name](teardown)
        notes = [n for t in teardowns for n in t.notes]
        _record(tenant, {
            "type": CONDITION,
            "status": "True" if index + 1 < len(plan) else "False",
            "reason": "InProgress" if index + 1 < len(plan) else "Completed",
            "message": f"step {index + 1}/{len(plan)} done: {name}" + "".join(f"; {n}" for n in notes),
            "step": name,
        })
    return _fold([r for t in teardowns for r in t.results])


def _record(tenant: Tenant, condition: dict[str, Any]) -> None:
    """Persist one condition now (autocommit): progress must survive a crash in the next step."""
    from .reconcile import _merge_condition

    condition = {**condition, "lastTransitionTime": clock.now().isoformat()}
    tenant.conditions = _merge_condition(list(tenant.conditions), condition)
    Tenant.objects.filter(pk=tenant.pk).update(conditions=tenant.conditions)


def _fold(results: list[ApplyResult]) -> ApplyResult:
    pruned: list[str] = []
    for result in results:
        pruned.extend(k for k in result.pruned if k not in pruned)
    return ApplyResult(pruned=pruned, revision=next((r.revision for r in reversed(results) if r.revision), None))
