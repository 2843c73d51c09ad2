"""`gpufleet simulate`: the JSON contract, presets, --compare, --trace and --from-fleet on a real database."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from billing.models import UsageRecord
from gpufleet import clock
from scheduling import actions
from tests.support import factories
from tests.support.clock import pinned

SCENARIO = {
    "days": 0.5,
    "fleet": {"node_pools": [{"name": "h100", "flavor": "h100", "nodes": 2, "provisioner": "none"}]},
    "cohorts": [{"name": "lab"}],
    "tenants": [{"name": "a", "cohort": "lab", "quotas": [{"flavor": "h100", "nominal": 8}]},
                {"name": "b", "cohort": "lab", "quotas": [{"flavor": "h100", "nominal": 8}]}],
    "workloads": [{"tenant": "a", "flavor": "h100", "jobs_per_hour": 6, "pods": 2, "gpus_per_pod": 2,
                   "duration_s": {"mean": 1800}}],
}


def cli(*args: str) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def write(tmp_path: Path, name: str, data: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_scenario_json_is_the_contract_and_byte_identical_per_seed(tmp_path):
    path = write(tmp_path, "s.yaml", SCENARIO)
    first, again = cli("--scenario", path, "--seed", "4", "--json"), cli("--scenario", path, "--seed", "4", "--json")
    assert first == again
    doc = json.loads(first)
    assert doc["seed"] == 4 and [t["name"] for t in doc["tenants"]] == ["a", "b"]
    a = doc["tenants"][0]
    assert a["jobs"] > 0 and a["borrowed_gpu_hours"] > 0  # 4-GPU jobs at 6/h overflow a's 8 into b's quota
    assert doc["tenants"][1]["lent_gpu_hours"] == pytest.approx(a["borrowed_gpu_hours"], rel=1e-3)
    assert "fleet: allocation" in cli("--scenario", path)


def test_preset_json_has_its_variants():
    doc = json.loads(cli("--preset", "seven-of-eight", "--days", "0.25", "--json"))
    assert set(doc) == {"seed", "variants"} and set(doc["variants"]) == {"pod-by-pod", "gang"}


def test_compare_runs_b_on_a_demand(tmp_path):
    b = dict(SCENARIO, tenants=[dict(t, quotas=[{"flavor": "h100", "nominal": 4}]) for t in SCENARIO["tenants"]],
             workloads=[])  # b's own demand is ignored: it runs on a's
    doc = json.loads(cli("--compare", write(tmp_path, "a.yaml", SCENARIO), write(tmp_path, "b.yaml", b), "--json"))
    assert doc["a"]["tenants"][0]["jobs"] == doc["b"]["tenants"][0]["jobs"] > 0
    assert "wait_mean_s" in doc["differences"]["tenants"]["a"]


def test_trace_replaces_the_demand(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text("tenant,flavor,submit,gpus,pods,duration_s\na,h100,0,16,2,3600\nb,h100,10,8,1,600\n")
    doc = json.loads(cli("--scenario", write(tmp_path, "s.yaml", SCENARIO), "--trace", str(trace), "--json"))
    a, b = doc["tenants"]
    assert (a["jobs"], b["jobs"]) == (1, 1)
    # a's 16 GPUs borrow b's 8; at t=10 b reclaims them (reclaimWithinCohort: Any): a's 2 pods are evicted,
    # b runs 600 s with no wait, then a's job starts over and waits 600 s in all.
    assert doc["fleet"]["evictions"] == 2
    assert b["wait_max_s"] == 0.0
    assert a["wait_max_s"] == pytest.approx(600.0)
    assert a["gpu_hours"] == pytest.approx(16 * (10 + 3600) / 3600, abs=1e-3)


@pytest.mark.parametrize(("args", "message"), [
    (["--scenario", "/nonexistent.yaml"], "--scenario: cannot read"),
    (["--preset", "seven-of-eight", "--days", "0"], "--days"),
])
def test_bad_input_is_a_clean_error(args, message):
    with pytest.raises(CommandError, match=message):
        cli(*args)


def test_invalid_scenario_names_the_field(tmp_path):
    bad = dict(SCENARIO, tenants=[{"name": "a", "quotas": [{"flavor": "h100", "nominal": "lots"}]}])
    with pytest.raises(CommandError, match=r"tenants\[0\]\.quotas\[0\]\.nominal"):
        cli("--scenario", write(tmp_path, "bad.yaml", bad))


@pytest.mark.django_db
def test_from_fleet_replays_recorded_usage():
    with pinned():
        model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
        flavor = actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=16)
        cohort = actions.create_cohort("lab")
        tenants = [factories.tenant(slug, phase="ready") for slug in ("vision", "speech")]
        for t in tenants:
            actions.set_tenant_scheduling(t, cohort=cohort.name)
            actions.set_quota(t, flavor="h100", nominal=8)
        hour = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=10)
        for h in range(6):  # vision ran 12 GPUs for 6 hours: 4 of them borrowed from speech
            at = hour + timedelta(hours=h)
            UsageRecord.objects.create(tenant=tenants[0], flavor=flavor, hour=at, unit_seconds=Decimal(12 * 3600),
                                       gpu_equivalent_seconds=Decimal(12 * 3600), collected_at=at,
                                       window_start=at, window_end=at + timedelta(hours=1))
        doc = json.loads(cli("--from-fleet", "--days", "1", "--json"))
    vision = next(t for t in doc["tenants"] if t["name"] == "vision")
    speech = next(t for t in doc["tenants"] if t["name"] == "speech")
    assert vision["gpu_hours"] == pytest.approx(72.0)
    assert vision["borrowed_gpu_hours"] == pytest.approx(24.0)
    assert speech["lent_gpu_hours"] == pytest.approx(24.0)
    assert vision["wait_max_s"] == 0.0


def test_byte_identical_across_processes_and_hash_seeds():
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    outputs = set()
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, DJANGO_SETTINGS_MODULE="gpufleet.settings.test")
        done = subprocess.run([sys.executable, "manage.py", "simulate", "--preset", "fair-share", "--days", "1",
                               "--seed", "3", "--json"], cwd=repo, env=env, capture_output=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1 and b'"variants"' in outputs.pop()


@pytest.mark.django_db
@pytest.mark.parametrize("fair", [True, False])
def test_from_fleet_follows_the_kueue_fair_sharing_setting(settings, fair):
    from scheduling.simulation.inputs import fleet_scenario

    settings.GPUFLEET_KUEUE_FAIR_SHARING = fair
    actions.create_cohort("lab")
    assert fleet_scenario(1, with_demand=False)["policies"]["fair_sharing"] is fair
