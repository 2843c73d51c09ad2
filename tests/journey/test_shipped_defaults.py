"""Issue 26, "what to build" 5(a): the journey fleet runs with the shipped production defaults -- checked here
against the production settings loaded in a clean process (no GPUFLEET_* variable) -- and again with each
documented option toggled (conftest.GPU_OPTION_SETS: every GPU journey runs once per option set).

At the shipped defaults the vCluster syncer is the chart's own (v0.36.1), which strips Kueue's gates: the
platform then refuses GPU pods at creation with the reason (B3) -- never a pod Kueue deletes, never one that
runs outside quota -- while everything else the tenant runs (its CoreDNS) works."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.services import REPO

from . import runner, workloads
from .conftest import GPU_OPTION_SETS
from .fleet import OPTIONS, SHIPPED, TRUST, render_fleet
from .steps import vcluster_sync
from .test_journeys import ALLOWED, NS

PRODUCTION = {
    "SECRET_KEY": "k3y-" + "0123456789abcdef" * 4, "ALLOWED_HOSTS": "gpufleet.example.com",
    "OIDC_OP_ISSUER": "https://idp.example.com", "OIDC_RP_CLIENT_ID": "gpufleet", "OIDC_RP_CLIENT_SECRET": "s3cret",
    "GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.gpu.corp.internal",
}


def shipped_settings() -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFLEET_", "DJANGO_"))}
    env.update(PRODUCTION, DJANGO_SETTINGS_MODULE="gpufleet.settings.production",
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    code = ("import json, django; django.setup(); from django.conf import settings; "
            f"print(json.dumps({{n: getattr(settings, n) for n in {sorted(SHIPPED)!r}}}))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_journey_fleet_is_rendered_with_the_shipped_production_defaults() -> None:
    actual = shipped_settings()
    for name, (_, value) in SHIPPED.items():
        want = list(value) if isinstance(value, tuple) else value
        assert actual[name] == want, f"{name}: the journey fleet uses {value!r}, production ships {actual[name]!r}"


def test_every_documented_option_is_toggled_by_some_journey_run() -> None:
    toggled = {option for options in GPU_OPTION_SETS.values() for option in options}
    assert toggled == set(OPTIONS)
    fields = {field for field, _ in SHIPPED.values()}
    assert all(set(change) <= fields for change in OPTIONS.values())


@pytest.mark.parametrize("slug", sorted(TRUST))
def test_at_shipped_defaults_gpu_pods_are_refused_with_the_reason_and_dns_runs(slug: str, chart_defaults) -> None:
    fleet = render_fleet()
    for mode in ALLOWED[slug]:
        for make in (workloads.training_pod, workloads.inference_pod):
            journey = runner.run(make(mode), NS[slug], fleet)
            step, reason = journey.refusal
            assert step == "kyverno-validate" and "removes Kueue's scheduling gates" in reason, journey
    dns = runner.run(vcluster_sync.coredns_pod(NS[slug], fleet, chart_defaults), NS[slug], fleet)
    assert dns.ok, dns
