"""The caller's own API tokens: create (the secret is shown exactly once), list, revoke.

Mirrors /api/v1/tokens/ (gpufleet.api.tokens): same model code, one transaction, one AuditEvent.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from gpufleet import clock
from gpufleet.accounts.models import ApiToken
from gpufleet.audit.record import record

from ..forms import ApiTokenForm

NAME_MAX = ApiToken._meta.get_field("name").max_length
# The plaintext survives one redirect in the session, then is gone: a reload does not show it again.
SESSION_KEY = "portal.new_token"


def _validate(form: ApiTokenForm) -> None:
    name = (form.cleaned_data.get("name") or "").strip()
    if not name:
        form.add_error("name", "is required")
    elif len(name) > NAME_MAX:
        form.add_error("name", f"must be at most {NAME_MAX} characters")
    expires_at = form.cleaned_data.get("expires_at")
    if expires_at is not None and expires_at <= clock.now():
        form.add_error("expires_at", "must be in the future")


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            _validate(form)
        if not form.errors:
            plaintext, prefix, digest = ApiToken.generate()
            with transaction.atomic():
                token = ApiToken.objects.create(
                    user=request.user, name=form.cleaned_data["name"].strip(), prefix=prefix, digest=digest,
                    expires_at=form.cleaned_data.get("expires_at"),
                )
                record("token.create", token, after={"name": token.name, "prefix": prefix})
            request.session[SESSION_KEY] = {"id": token.pk, "name": token.name, "secret": plaintext}
            return redirect("portal:tokens")
    context = {
        "form": form,
        "tokens": ApiToken.objects.for_user(request.user),
        "new_token": request.session.pop(SESSION_KEY, None),
    }
    return render(request, "portal/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.for_user(request.user), pk=pk)
    with transaction.atomic():
        if token.revoked_at is None:
            token.revoked_at = clock.now()
            token.save(update_fields=["revoked_at"])
            record("token.revoke", token, after={"name": token.name, "prefix": token.prefix})
    messages.success(request, f"Token “{token.name}” revoked; it stops working immediately.")
    return redirect("portal:tokens")
