"""Portal page "Simulate" (platform admins only): run a preset or an uploaded scenario through the worker
and see the outputs with server-side charts. Tenant users get 403."""

from __future__ import annotations

import inspect

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from gpufleet.accounts.roles import is_platform_admin
from gpufleet.outbox import send as outbox
from scheduling.models import InferenceEndpoint, SimulationRun
from scheduling.simulation.chart import charts
from scheduling.simulation.plan_html import to_html as plan_html_of
from scheduling.simulator import PRESETS, ScenarioError, load_scenario

MAX_UPLOAD = 512 * 1024


class SimulateForm(forms.Form):
    preset = forms.ChoiceField(required=False, choices=[("", "(upload a scenario)")] + [(p, p) for p in PRESETS],
                               help_text="each preset is explained under the form")
    scenario = forms.FileField(required=False, help_text="YAML or JSON, schema in docs/simulator.md")
    seed = forms.IntegerField(initial=0, min_value=0, max_value=2**31 - 1)
    days = forms.FloatField(required=False, min_value=0.01, max_value=90)

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("scenario")
        if bool(data.get("preset")) == bool(upload):
            raise forms.ValidationError("pick a preset or upload a scenario (one of them)")
        if upload:
            if upload.size > MAX_UPLOAD:
                self.add_error("scenario", f"larger than {MAX_UPLOAD // 1024} KiB")
                return data
            try:
                text = upload.read().decode("utf-8")
                load_scenario(text)  # validates (schema and references); raises ScenarioError naming the field
            except UnicodeDecodeError:
                self.add_error("scenario", "not UTF-8 text")
                return data
            except ScenarioError as exc:
                self.add_error("scenario", str(exc))
                return data
            import yaml

            data["parsed"] = yaml.safe_load(text)
        return data


def _admin(request: HttpRequest) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("the simulator is for platform admins")


@login_required
def simulate(request: HttpRequest) -> HttpResponse:
    _admin(request)
    form = SimulateForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        if not form.is_valid():
            return render(request, "scheduling/simulate.html", {"form": form, "runs": _recent(),
                                                                "presets": preset_guide()}, status=400)
        d = form.cleaned_data
        with transaction.atomic():
            run = SimulationRun.objects.create(preset=d.get("preset") or "", scenario=d.get("parsed") or {},
                                               seed=d["seed"], days=d.get("days"), created_by=request.user)
            # Through the outbox: starting a run never fails because the broker is down (docs/operations.md).
            outbox.enqueue("scheduling.run_simulation", run.pk)
        return redirect("scheduling:simulation", pk=run.pk)
    return render(request, "scheduling/simulate.html", {"form": form, "runs": _recent(), "presets": preset_guide()})


def preset_guide() -> list[dict[str, object]]:
    """Each preset in the words of its own docstring (what failure it reproduces) and the variants it
    compares, so the form's choice is not a bare name."""
    guide = []
    for name, build in PRESETS.items():
        text = " ".join((inspect.getdoc(build) or "").split())
        _base, variants = build()
        guide.append({"name": name, "what": text, "variants": list(variants)})
    return guide


def _recent() -> list[SimulationRun]:
    return list(SimulationRun.objects.only("pk", "preset", "endpoint_id", "seed", "days", "state", "created")[:20])


@login_required
def simulation(request: HttpRequest, pk: int) -> HttpResponse:
    _admin(request)
    run = get_object_or_404(SimulationRun, pk=pk)
    doc = run.result if run.state == SimulationRun.State.DONE else None
    if doc and run.endpoint_id:  # an autoscaling plan: markdown and its candidates, no run document
        plan_html = mark_safe(plan_html_of(doc.get("markdown", "")))  # noqa: S308 - plan_html escapes all text
        return render(request, "scheduling/simulation.html", {"run": run, "plan": doc, "plan_html": plan_html,
                                                              "variants": [], "charts": []})
    variants = list(doc["variants"].items()) if doc and "variants" in doc else ([("run", doc)] if doc else [])
    return render(request, "scheduling/simulation.html", {
        "run": run, "variants": variants,
        "charts": [mark_safe(svg) for svg in charts(doc)] if doc else [],  # noqa: S308 - built with escape()
    })


@login_required
@require_POST
def plan_autoscaling(request: HttpRequest, pk: int) -> HttpResponse:
    """The endpoint's autoscaling plan, computed by the worker on its recorded traffic (2 days)."""
    _admin(request)
    endpoint = get_object_or_404(InferenceEndpoint, pk=pk)
    with transaction.atomic():
        run = SimulationRun.objects.create(endpoint=endpoint, days=2.0, created_by=request.user)
        outbox.enqueue("scheduling.run_simulation", run.pk)
    return redirect("scheduling:simulation", pk=run.pk)
