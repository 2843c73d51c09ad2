"""Portal forms for quota change requests, reviews and endpoints. Shape only; rules are in actions."""

from __future__ import annotations

from django import forms

from gpufleet.core.errors import ActionError

from .defaults import SLA_TIERS

DEFAULT_TIER = "standard"


class QuotaRequestForm(forms.Form):
    flavor = forms.ChoiceField(label="GPU flavor", help_text="Only the flavors your trust level allows.")
    nominal = forms.CharField(max_length=12, label="Guaranteed units (nominal quota)",
                              help_text="Units of the flavor always available to you; 0 or more.")
    cluster = forms.ChoiceField(label="Cluster", required=False,
                                help_text="The host cluster the quota is on. Empty: the tenant's home cluster.")
    borrowing_limit = forms.CharField(max_length=12, required=False, label="Borrowing limit",
                                      help_text="Extra units you may borrow from idle cohort quota. Empty: keep the "
                                                "current limit (none on a new quota); 'none': no limit.")
    lending_limit = forms.CharField(max_length=12, required=False, label="Lending limit",
                                    help_text="Units of yours others may borrow while idle. Empty: keep the current "
                                              "limit (none on a new quota); 'none': all idle quota.")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, max_length=2000,
                             label="Reason", help_text="What the GPUs are for and until when; the reviewer reads it.")

    def __init__(self, *args, flavors: list[str], clusters: list[str] = (), **kwargs) -> None:  # type: ignore[no-untyped-def,assignment]
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]
        self.fields["cluster"].choices = [("", "home cluster"), *((name, name) for name in clusters)]


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
    gated = forms.BooleanField(required=False, label="Gated model",
                               help_text="The model is gated on Hugging Face: serving needs the tenant's token "
                                         "(kept in OpenBao, tenants/<slug>/huggingface, key token).")

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


class QuotaSetForm(forms.Form):
    """A platform admin sets a tenant's quota directly (no review): scheduling.actions.set_quota."""

    flavor = forms.ChoiceField(label="GPU flavor", help_text="Only the flavors the tenant's trust level allows.")
    cluster = forms.ChoiceField(label="Cluster", required=False,
                                help_text="The host cluster the quota is on. Empty: the tenant's home cluster.")
    nominal = forms.CharField(max_length=12, label="Guaranteed units (nominal quota)",
                              help_text="Units of the flavor always available to the tenant; 0 or more. Checked "
                                        "against the flavor's capacity.")
    borrowing_limit = forms.CharField(max_length=12, required=False, label="Borrowing limit",
                                      help_text="Extra units it may borrow from idle cohort quota. Empty: no limit.")
    lending_limit = forms.CharField(max_length=12, required=False, label="Lending limit",
                                    help_text="Units of its quota others may borrow while idle; at most the nominal "
                                              "quota. Empty: all idle quota.")

    def __init__(self, *args, flavors: list[str], clusters: list[str], **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]
        self.fields["cluster"].choices = [("", "home cluster"), *((name, name) for name in clusters)]


CONSOLIDATION_HELP = ("WhenEmpty removes a node only once no pod runs on it. WhenEmptyOrUnderutilized also "
                      "moves running GPU pods (live inference) to pack nodes: allow it explicitly with "
                      "'Allow consolidating under-utilized nodes'.")


class NodePoolForm(forms.Form):
    """A platform admin creates a Karpenter GPU NodePool: scheduling.actions.create_node_pool."""

    name = forms.CharField(max_length=63, label="Name",
                           help_text="Lowercase letters, digits and '-'; names the Karpenter NodePool.")
    flavor = forms.ChoiceField(label="GPU flavor", help_text="The flavor the pool's nodes offer.")
    cluster = forms.ChoiceField(label="Cluster", required=False,
                                help_text="The cluster Karpenter runs in. Empty: the default cluster.")
    gpu_limit = forms.CharField(max_length=6, initial="8", label="GPU limit",
                                help_text="Most GPUs the pool may hold at once (Karpenter limits nvidia.com/gpu).")
    gpus_per_node = forms.CharField(max_length=2, initial="8", label="GPUs per node",
                                    help_text="GPUs on one node of the pool's instance types; 1 to 64.")
    trust_levels = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Trust levels",
        help_text="Tenants of these trust levels may schedule on the pool. None ticked: every level.")
    capacity_types = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple, initial=["on-demand"], label="Capacity types",
        choices=[("on-demand", "on-demand"), ("spot", "spot (may be reclaimed at short notice)")],
        help_text="Which kinds of instances Karpenter may launch.",
        error_messages={"required": "tick at least one capacity type"})
    instance_types = forms.CharField(max_length=500, required=False, label="Instance types",
                                     help_text="Comma-separated, e.g. p5.48xlarge, p4d.24xlarge. Empty: any type "
                                               "that has the flavor's GPUs.")
    consolidation_policy = forms.ChoiceField(label="Consolidation", help_text=CONSOLIDATION_HELP)
    consolidate_after = forms.CharField(max_length=20, initial="1h", label="Consolidate after",
                                        help_text="How long a node stays empty before removal: 30m, 1h, or Never.")
    allow_underutilized = forms.BooleanField(required=False, label="Allow consolidating under-utilized nodes",
                                             help_text="Needed for WhenEmptyOrUnderutilized: it evicts running "
                                                       "GPU pods.")

    def __init__(self, *args, flavors: list[str], clusters: list[str], trust_levels: list[tuple[str, str]],  # type: ignore[no-untyped-def]
                 policies: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [(name, name) for name in flavors]
        self.fields["cluster"].choices = [("", "default cluster"), *((name, name) for name in clusters)]
        self.fields["trust_levels"].choices = trust_levels
        self.fields["consolidation_policy"].choices = [(policy, policy) for policy in policies]
        self.fields["consolidation_policy"].initial = policies[0] if policies else None

    def clean_instance_types(self) -> list[str] | None:
        value = self.cleaned_data["instance_types"]
        return [part.strip() for part in value.split(",") if part.strip()] or None


NO_LIMIT = "none"


def limit_or_keep(value: str) -> object:
    """A limit field of a quota form: empty keeps the current limit (scheduling.actions.KEEP), 'none' asks for
    no limit, anything else is for the action to check (it names the field when it is not a count)."""
    from .actions import KEEP

    text = value.strip()
    if not text:
        return KEEP
    return None if text.lower() == NO_LIMIT else value
