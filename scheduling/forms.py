"""Portal forms for quota change requests, reviews and endpoints. Shape only; rules are in actions."""

from __future__ import annotations

from django import forms

from tenants.errors import ActionError


class QuotaRequestForm(forms.Form):
    flavor = forms.ChoiceField()
    nominal = forms.CharField(max_length=12)
    borrowing_limit = forms.CharField(max_length=12, required=False, help_text="empty: no limit in the cohort")
    lending_limit = forms.CharField(max_length=12, required=False, help_text="empty: all idle quota may be lent")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, max_length=2000)

    def __init__(self, *args, flavors: list[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]


class ReviewForm(forms.Form):
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, max_length=2000)


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=50)
    model = forms.CharField(max_length=200, help_text="served model name (vLLM model_name)")
    tier = forms.ChoiceField()
    deployment = forms.CharField(max_length=63, required=False, help_text="empty: same as the name")

    def __init__(self, *args, tiers: list[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["tier"].choices = [(name, name) for name in tiers]


def add_action_errors(form: forms.Form, error: ActionError) -> None:
    for field, reasons in error.errors.items():
        for reason in reasons:
            form.add_error(field if field in form.fields else None, reason if field in form.fields or not field
                           else f"{field}: {reason}")
