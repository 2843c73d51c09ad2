"""My tenants, request a tenant, tenant detail and the owner/admin actions on it."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.audit.models import AuditEvent
from gpufleet.core.errors import ActionError
from tenants import actions
from tenants.isolation.kubeconfig import kubeconfig_yaml
from tenants.models import FINAL_PHASES, Membership, Phase, Tenant, can_manage

from ..access import require_manager, scoped_tenant
from ..forms import (
    DeleteTenantForm,
    DisplayNameForm,
    RejectForm,
    RequestTenantForm,
    TrustLevelForm,
    add_action_errors,
)

RECENT_EVENTS = 20
# Mirrors tenants.actions.suspend: the phases from which a tenant can be suspended.
SUSPENDABLE = {Phase.APPROVED, Phase.PROVISIONING, Phase.READY, Phase.FAILED}


@login_required
def tenant_list(request: HttpRequest) -> HttpResponse:
    # The caller's own role comes from a subquery, so the page costs the same few queries
    # however many tenants it lists.
    my_role = Membership.objects.filter(tenant=OuterRef("pk"), user=request.user).values("role")[:1]
    tenants = Tenant.objects.for_user(request.user).annotate(my_role=Subquery(my_role)).order_by("slug")
    # ?phase=requested: the overview's "tenants by phase" figures link here.
    phase = request.GET.get("phase") if request.GET.get("phase") in Phase.values else ""
    if phase:
        tenants = tenants.filter(phase=phase)
    return render(request, "portal/tenant_list.html", {"tenants": tenants, "phase": phase})


@login_required
def tenant_request(request: HttpRequest) -> HttpResponse:
    form = RequestTenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            tenant = actions.request_tenant(
                data["slug"], data["trust_level"], data["display_name"], requested_by=request.user
            )
        except ActionError as exc:
            add_action_errors(form, exc)
        else:
            messages.success(
                request,
                f"Tenant “{tenant.slug}” was requested. A platform admin will review it."
            )
            return redirect("portal:tenant-detail", slug=tenant.slug)
    status = 400 if form.errors else 200
    return render(request, "portal/tenant_request.html", {"form": form}, status=status)


@dataclass(frozen=True)
class OwnedObject:
    kind: str
    group: str
    namespace: str
    name: str

    @classmethod
    def parse(cls, key: str) -> OwnedObject:
        """`Kind.group/namespace/name` (infra.manifests.ObjectRef.key) split into columns."""
        kind_group, namespace, name = [*key.split("/", 2), "", ""][:3]
        kind, _, group = kind_group.partition(".")
        return cls(kind, "" if group == "core" else group, "" if namespace == "-" else namespace, name)


def liveness(tenant: Tenant) -> tuple[str, str]:
    """(tone, sentence) answering "is my latest change live?" from generation vs observed."""
    if tenant.phase == Phase.REQUESTED:
        return "waiting", "Waiting for a platform admin's approval. Nothing is deployed yet."
    if tenant.phase == Phase.REJECTED:
        return "bad", "This request was rejected. Nothing was deployed."
    if tenant.phase == Phase.DELETED:
        return "muted", "This tenant was deleted and everything it owned was removed."
    if tenant.phase == Phase.FAILED:
        return "bad", (
            f"The last apply failed (see the conditions). Generation {tenant.generation} is not live; "
            f"generation {tenant.observed_generation or 'none'} was the last applied."
        )
    if tenant.is_synced:
        return "good", f"Your latest change is live: generation {tenant.generation} has been applied."
    applied = (f"generation {tenant.observed_generation} is what runs now"
               if tenant.observed_generation else "nothing has been applied yet")
    return "waiting", f"Your latest change (generation {tenant.generation}) is not live yet; {applied}."


@login_required
def tenant_detail(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = scoped_tenant(request, slug)
    events = (
        AuditEvent.objects.filter(tenant_slug=tenant.slug).select_related("actor_user")[:RECENT_EVENTS]
    )
    tone, sentence = liveness(tenant)
    manager = can_manage(request.user, tenant)
    admin = is_platform_admin(request.user)
    changeable = tenant.phase not in FINAL_PHASES and tenant.phase != Phase.DEPROVISIONING
    context = {
        "tenant": tenant,
        "memberships": list(tenant.memberships.all()),
        "objects": [OwnedObject.parse(key) for key in tenant.applied_objects],
        "events": events,
        "live_tone": tone,
        "live_sentence": sentence,
        "can_manage": manager and changeable,
        "is_admin_view": admin,
        "changeable": changeable,
        "name_form": DisplayNameForm(initial={"display_name": tenant.display_name}),
        "trust_form": TrustLevelForm(initial={"trust_level": tenant.trust_level}),
        "reject_form": RejectForm(),
        "can_approve": admin and tenant.phase == Phase.REQUESTED,
        "can_suspend": admin and tenant.phase in SUSPENDABLE,
        "can_resume": admin and tenant.phase == Phase.SUSPENDED,
        # Offer the download only when there is one to give; otherwise say why (no dead end behind a button).
        "kubeconfig_problems": kubeconfig_problems(tenant),
    }
    return render(request, "portal/tenant_detail.html", context)


def kubeconfig_problems(tenant: Tenant) -> list[str]:
    try:
        kubeconfig_yaml(tenant)
    except ActionError as exc:
        return [reason for reasons in exc.errors.values() for reason in reasons]
    return []


@login_required
@require_POST
def tenant_rename(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = scoped_tenant(request, slug)
    require_manager(request, tenant)
    form = DisplayNameForm(request.POST)
    form.is_valid()
    try:
        actions.update(tenant, display_name=form.cleaned_data.get("display_name", ""))
    except ActionError as exc:
        for field, reasons in exc.errors.items():
            messages.error(request, f"{field.replace('_', ' ') or 'Rename'}: {', '.join(reasons)}")
    else:
        messages.success(request, "Display name saved.")
    return redirect("portal:tenant-detail", slug=tenant.slug)


@login_required
def tenant_delete(request: HttpRequest, slug: str) -> HttpResponse:
    tenant = scoped_tenant(request, slug)
    require_manager(request, tenant)
    form = DeleteTenantForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if form.cleaned_data["confirm"] != tenant.slug:
            form.add_error("confirm", f"type “{tenant.slug}” exactly to confirm")
        else:
            try:
                actions.delete(tenant)
            except ActionError as exc:
                add_action_errors(form, exc)
            else:
                messages.success(request, f"Tenant “{tenant.slug}” is being deleted; what it owns is pruned.")
                return redirect("portal:tenant-detail", slug=tenant.slug)
    status = 400 if form.errors else 200
    return render(request, "portal/tenant_delete.html", {"tenant": tenant, "form": form}, status=status)

