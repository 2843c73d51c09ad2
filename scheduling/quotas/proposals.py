"""Quota proposals as branches of the GitOps repository (infra.gitops.branches, by gitops-sync).

A pending request is branch `quota/<id>`: one commit over main holding the tenant's folder as the
change would leave it. Approval merges it: exactly one commit on main touching only that tenant's
files. Rejection deletes the branch; main is untouched.
"""

from __future__ import annotations

from django.db import transaction

from gpufleet.core import conf
from infra.errors import PermanentError
from infra.gitops import branches
from scheduling.models import QuotaChangeRequest
from scheduling.quotas.preview import proposed_on_cluster


def _repo() -> str:
    return conf.GITOPS_REPO


def propose(request: QuotaChangeRequest) -> str:
    _, after, owner = proposed_on_cluster(request)
    message = (f"quota request {request.pk}: tenant {request.tenant.slug} {request.flavor.name} "
               f"nominal {request.nominal}")
    return branches.propose(_repo(), request.branch, owner, after, message)


def merge(request: QuotaChangeRequest) -> str:
    """Merge the reviewed branch. If main moved under it, re-propose from the database (which now holds
    the approved quota) and merge that: still one commit, still only the tenant's files."""
    message = f"tenant {request.tenant.slug}: approved quota request {request.pk} ({request.flavor.name})"
    try:
        if not branches.exists(_repo(), request.branch):
            raise PermanentError("no proposal branch")
        revision = branches.merge(_repo(), request.branch, message)
    except PermanentError:
        now, _, owner = proposed_on_cluster(request)  # the database holds the approved quota by now
        branches.propose(_repo(), request.branch, owner, now, f"quota request {request.pk} (re-proposed at approval)")
        revision = branches.merge(_repo(), request.branch, message)
    branches.discard(_repo(), request.branch)
    with transaction.atomic():
        QuotaChangeRequest.objects.filter(pk=request.pk).update(revision=revision)
    return revision


def discard(request: QuotaChangeRequest) -> str:
    if branches.exists(_repo(), request.branch):
        branches.discard(_repo(), request.branch)
        return "discarded"
    return "no branch"
