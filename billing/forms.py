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


class PriceForm(forms.Form):
    """A billing admin sets a flavor's price from a date on: billing.actions.set_price."""

    flavor = forms.ChoiceField(label="GPU flavor", help_text="Priced per unit-hour of the flavor (a MIG slice or "
                                                             "HAMi share is one unit).")
    cluster = forms.ChoiceField(label="Cluster", required=False,
                                help_text="Empty: every cluster. A cluster's own price wins over the every-cluster "
                                          "price there.")
    per_unit_hour = forms.CharField(max_length=24, label="Price per unit-hour",
                                    help_text="A decimal number like 2.50, up to 6 decimal places.")
    currency = forms.ChoiceField(label="Currency", help_text="One of the currencies billing supports.")
    effective_from = forms.CharField(
        max_length=10, required=False, label="Effective from", widget=forms.DateInput(attrs={"type": "date"}),
        help_text="The first day the price applies (UTC), today or later: prices cannot change retroactively. "
                  "It ends the flavor's current price on that day. Empty: today.")

    def __init__(self, *args, flavors: list[str], clusters: list[str], currencies: list[str],  # type: ignore[no-untyped-def]
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]
        self.fields["cluster"].choices = [("", "every cluster"), *((name, name) for name in clusters)]
        self.fields["currency"].choices = [(code, code) for code in currencies]
