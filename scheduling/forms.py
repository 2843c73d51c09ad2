"""Portal forms for quota change requests, reviews and endpoints. Shape only; rules are in actions."""

from __future__ import annotations

from django import forms

from tenants.errors import ActionError

from .defaults import SLA_TIERS

DEFAULT_TIER = "standard"


class QuotaRequestForm(forms.Form):
    flavor = forms.ChoiceField(label="GPU flavor", help_text="Only the flavors your trust level allows.")
    nominal = forms.CharField(max_length=12, label="Guaranteed units (nominal quota)",
                              help_text="Units of the flavor always available to you; 0 or more.")
    borrowing_limit = forms.CharField(max_length=12, required=False, label="Borrowing limit",
                                      help_text="Extra units you may borrow from idle cohort quota. Empty: no limit.")
    lending_limit = forms.CharField(max_length=12, required=False, label="Lending limit",
                                    help_text="Units of yours others may borrow while idle. Empty: all idle quota.")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, max_length=2000,
                             label="Reason", help_text="What the GPUs are for and until when; the reviewer reads it.")

    def __init__(self, *args, flavors: list[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]


class ReviewForm(forms.Form):
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=2000,
                              label="Comment", help_text="Shown to the requester with your decision.")


class EndpointForm(forms.Form):
    name = forms.CharField(max_length=50, label="Name",
                           help_text="Lowercase letters, digits and '-'; names the KEDA ScaledObject.")
    model = forms.CharField(max_length=200, label="Model", help_text="The served model name (vLLM model_name).")
    tier = forms.ChoiceField(label="SLA tier", initial=DEFAULT_TIER,
                             help_text="critical never scales to zero; standard scales to zero and is pre-warmed "
                                       "for business hours; batch accepts cold starts.")
    deployment = forms.CharField(max_length=63, required=False, label="Deployment",
                                 help_text="The vLLM Deployment to scale. Empty: same as the name.")

    def __init__(self, *args, tiers: list[tuple[str, str]], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["tier"].choices = [(name, f"{name} — {description}" if description else name)
                                       for name, description in ordered_tiers(tiers)]


def ordered_tiers(tiers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(name, description) pairs, the default tiers first in order of urgency (critical, standard, batch),
    then any tier an admin added, by name."""
    rank = {name: position for position, name in enumerate(SLA_TIERS)}
    return sorted(tiers, key=lambda tier: (rank.get(tier[0], len(rank)), tier[0]))


def add_action_errors(form: forms.Form, error: ActionError) -> None:
    for field, reasons in error.errors.items():
        for reason in reasons:
            form.add_error(field if field in form.fields else None, reason if field in form.fields or not field
                           else f"{field}: {reason}")
