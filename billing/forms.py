"""Billing admins' invoice forms (finalize, void). Shape only: the rules live in billing.actions."""

from __future__ import annotations

from django import forms


class FinalizeForm(forms.Form):
    confirm = forms.BooleanField(
        label="I checked the lines: finalize this invoice",
        help_text="Finalizing takes the next invoice number; the invoice can never change afterwards "
                  "(void and reissue to correct it).",
        error_messages={"required": "tick the box to confirm"},
    )


class VoidForm(forms.Form):
    reason = forms.CharField(
        label="Reason", widget=forms.Textarea(attrs={"rows": 4}), max_length=2000,
        help_text="Why the invoice is void; kept with the invoice and in the audit trail.",
        error_messages={"required": "is required: say why the invoice is void"},
    )
    confirm = forms.BooleanField(
        label="Void this invoice",
        help_text="It keeps its number (numbering stays gapless); reissue a new draft afterwards.",
        error_messages={"required": "tick the box to confirm"},
    )
