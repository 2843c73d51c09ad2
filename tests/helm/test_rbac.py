"""Issue 16 §2: the ClusterRole grants what the kubernetes backend needs, derived from one list in code."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from infra.kube.resources import (
    PRUNE_KINDS,
    PRUNED_ONLY_KINDS,
    READ_SECRET_NAMES,
    RENDERED_KINDS,
    cluster_role_rules,
)
from tenants.secrets import VCLUSTER_KUBECONFIG_SECRET
from tests.support.services import need_binary, need_reference

from .chart import render

KUBE = {"config": {"backend": "kubernetes"}, "rbac": {"create": True}, "gitops": {"persistence": {"enabled": False}}}


def role_rules() -> list[dict]:
    return render(KUBE).get("ClusterRole", "gpufleet-apply")["rules"]


def test_chart_cluster_role_is_exactly_the_rules_derived_in_code() -> None:
    assert role_rules() == cluster_role_rules()


def test_no_privilege_escalation_and_no_kind_beyond_the_renderers() -> None:
    rules = role_rules()
    verbs = {v for rule in rules for v in rule["verbs"]}
    assert not verbs & {"bind", "escalate", "impersonate", "update", "watch", "*"}
    groups = {g for rule in rules for g in rule["apiGroups"]}
    assert "rbac.authorization.k8s.io" not in groups and "*" not in groups
    resources = {r for rule in rules for r in rule["resources"]}
    for never in ("serviceaccounts", "priorityclasses", "networkpolicies", "clusterpolicies",
                  "clusterroles", "clusterrolebindings", "roles", "rolebindings"):
        assert never not in resources
    [secret_rule] = [rule for rule in rules if "secrets" in rule["resources"]]
    assert secret_rule == {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [VCLUSTER_KUBECONFIG_SECRET],
                           "verbs": ["get"]}
    assert READ_SECRET_NAMES == (VCLUSTER_KUBECONFIG_SECRET,)


def test_prune_kinds_are_the_rendered_kinds() -> None:
    assert PRUNE_KINDS == tuple((v, k) for v, k, _ in RENDERED_KINDS)


@pytest.mark.django_db(transaction=True)
def test_a_full_demo_fleet_renders_exactly_the_listed_kinds(gitops_repo: Path, eager_tasks, settings) -> None:
    """Every kind the renderers emit for the demo fleet (all trust levels, quotas, endpoints, node pools)
    is in RENDERED_KINDS, and every listed kind is rendered (or kept only to prune leftovers): the role grants
    nothing unused."""
    need_binary("git")
    need_reference()
    settings.GPUFLEET_TOPOLOGY_LEVELS = ["gpufleet.io/topology-block"]  # the option that renders KAI's Topology
    settings.GPUFLEET_PROMETHEUS_OPERATOR = True  # ... and the one that renders the capacity rules (Kueue scraped)
    call_command("demo")
    kinds = _kinds(gitops_repo)
    # The capacity alerts are a PrometheusRule or a VMRule, by a setting: render the fleet with the other one.
    from scheduling.fleetops.models import FleetSettings
    from tenants.fleet import reconcile_fleet

    FleetSettings.objects.update_or_create(pk=1, defaults={"rule_kind": FleetSettings.RuleKind.VM})
    assert reconcile_fleet().errors == []
    with_vmrule = _kinds(gitops_repo)
    assert ("operator.victoriametrics.com/v1beta1", "VMRule") in with_vmrule - kinds
    assert not kinds & PRUNED_ONLY_KINDS
    assert kinds | with_vmrule | PRUNED_ONLY_KINDS == set(PRUNE_KINDS)


def _kinds(gitops_repo: Path) -> set[tuple[str, str]]:
    kinds = set()
    for path in gitops_repo.rglob("*.yaml"):
        if ".git" not in path.parts and (obj := yaml.safe_load(path.read_text())):
            kinds.add((obj["apiVersion"], obj["kind"]))
    return kinds


def test_read_only_resources_get_only_get_and_list(monkeypatch) -> None:
    from infra.kube import resources

    read_only = (("", "nodes"), ("apiextensions.k8s.io", "customresourcedefinitions"))
    monkeypatch.setattr(resources, "READ_ONLY_RESOURCES", read_only)
    rules = resources.cluster_role_rules()
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]} in rules
    assert {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
            "verbs": ["get", "list"]} in rules
