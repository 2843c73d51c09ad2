"""The rendered Kyverno policy's logic: which GPU pods each trust level admits (evaluated, not just schema-checked)."""

from __future__ import annotations

import kubernetes_validate
import pytest

from tenants.isolation import kyverno
from tenants.isolation.config import TenantIsolationView

from .helpers import find, pod, rendered, view
from .kyverno_eval import admit

MIG = {"nvidia.com/mig-3g.40gb": 1}
HAMI = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}
HAMI_PERCENT = {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50}
WHOLE = {"nvidia.com/gpu": 2}
CPU_ONLY = {"cpu": "1", "memory": "1Gi"}


def policy_for(level: str) -> dict:
    return find(rendered(level), "Policy", kyverno.POLICY_NAME)


@pytest.mark.parametrize(
    ("level", "limits", "allowed"),
    [
        ("untrusted", WHOLE, True),
        ("untrusted", CPU_ONLY, True),
        ("untrusted", MIG, False),
        ("untrusted", HAMI, False),
        ("untrusted", HAMI_PERCENT, False),
        ("standard", WHOLE, True),
        ("standard", MIG, True),
        ("standard", HAMI, False),
        ("trusted", WHOLE, True),
        ("trusted", MIG, True),
        ("trusted", HAMI, True),
        ("trusted", HAMI_PERCENT, True),
    ],
)
def test_gpu_modes_by_trust_level(level: str, limits: dict, allowed: bool) -> None:
    ns = f"tenant-t-{level}"
    candidate = pod(ns, limits)
    kubernetes_validate.validate(candidate, "1.33", strict=True)  # the pod itself is a real Pod
    decision = admit(policy_for(level), candidate)
    assert decision.allowed is allowed, decision
    if not allowed:
        assert f"trust level {level}" in decision.message


@pytest.mark.parametrize("where", ["init", "requests"])
def test_other_places_a_pod_names_resources_are_checked(where: str) -> None:
    candidate = pod("tenant-t-untrusted", MIG, init=where == "init", requests_only=where == "requests")
    assert not admit(policy_for("untrusted"), candidate).allowed


def test_a_tightened_tenant_loses_modes_its_level_has() -> None:
    iso = TenantIsolationView(allowed_modes=frozenset({"mig"}), world_egress=True)
    policy = find(rendered("trusted", isolation=iso), "Policy", kyverno.POLICY_NAME)
    assert not admit(policy, pod("tenant-t-trusted", WHOLE)).allowed
    assert admit(policy, pod("tenant-t-trusted", MIG)).allowed
    assert not admit(policy, pod("tenant-t-trusted", HAMI)).allowed
    assert policy["metadata"]["annotations"]["gpufleet.io/allowed-modes"] == "mig"


def test_policy_only_applies_in_its_namespace_and_to_pods() -> None:
    policy = policy_for("untrusted")
    assert admit(policy, pod("tenant-other", MIG)).allowed
    rule = policy["spec"]["rules"][0]
    assert rule["match"]["any"][0]["resources"]["kinds"] == ["Pod"]
    assert rule["validate"]["failureAction"] == "Enforce"


def test_rendering_is_deterministic() -> None:
    assert kyverno.gpu_policy(view("standard"), frozenset({"mig", "whole"})) == kyverno.gpu_policy(
        view("standard"), frozenset({"whole", "mig"})
    )
