"""Portal forms. They describe the shape of the input only: the rules live in the actions, so the
portal, the API and the CLI reject the same input with the same words.
"""

from __future__ import annotations

from django import forms

from gpufleet.core.errors import ActionError
from tenants.models import TrustLevel

TRUST_CHOICES = [("", "Choose a trust level…"), *TrustLevel.choices]
# The admin card is narrow and its reader knows what each level means.
TRUST_SHORT_CHOICES = [(value, value) for value in TrustLevel.values]


class RequestTenantForm(forms.Form):
    slug = forms.CharField(
        required=False, strip=False, label="Slug",
        help_text="Lowercase letters, digits and '-', 3 to 40 characters. Names the namespace tenant-<slug>; "
                  "it can never be changed or reused.",
    )
    display_name = forms.CharField(required=False, label="Display name", help_text="Defaults to the slug.")
    trust_level = forms.CharField(
        required=False, label="Trust level", widget=forms.Select(choices=TRUST_CHOICES),
        help_text="Decides which GPU sharing modes the tenant may use. A platform admin may tighten it.",
    )


class DisplayNameForm(forms.Form):
    display_name = forms.CharField(required=False, label="Display name")


class TrustLevelForm(forms.Form):
    trust_level = forms.CharField(
        required=False, label="Trust level", widget=forms.Select(choices=TRUST_SHORT_CHOICES)
    )


class RejectForm(forms.Form):
    reason = forms.CharField(required=False, max_length=2000, label="Reason (shown to the requester)")


class DeleteTenantForm(forms.Form):
    confirm = forms.CharField(required=False, strip=True, label="Type the tenant's slug to confirm")


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        required=False, label="Name", help_text="What the token is for, e.g. “terraform CI”."
    )
    expires_at = forms.DateTimeField(
        required=False, label="Expires (UTC, optional)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
    )


def add_action_errors(form: forms.Form, error: ActionError) -> None:
    """Show an action's field errors next to the fields; anything else above the form."""
    for field, reasons in error.errors.items():
        for reason in reasons:
            if field in form.fields:
                form.add_error(field, reason)
            else:
                form.add_error(None, f"{field}: {reason}" if field else reason)
