"""The classification table and the limits: defaults seeded, bad input refused naming the field, audited."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpufleet.audit.models import AuditEvent
from gpufleet.core.errors import ActionError
from scheduling.nodehealth.actions import set_policy, set_rule
from scheduling.nodehealth.classify import Reading, classify
from scheduling.nodehealth.models import HealthRule, RemediationPolicy
from scheduling.nodehealth.rules import DEFAULT_RULES, active_rules

pytestmark = pytest.mark.django_db


def test_the_migration_seeds_the_defaults_and_a_dry_run_policy() -> None:
    assert HealthRule.objects.count() == len(DEFAULT_RULES)
    policy = RemediationPolicy.current()
    assert (policy.dry_run, policy.max_nodes, policy.max_percent) == (True, 1, Decimal(10))
    # Application XIDs never act alone; XID 79 drains, twice replaces.
    rules = active_rules()
    assert classify("n", [Reading("n", "xid", "43", Decimal(5))], rules).state == "healthy"
    assert classify("n", [Reading("n", "xid", "79", Decimal(1))], rules).state == "drain"
    assert classify("n", [Reading("n", "xid", "79", Decimal(2))], rules).state == "replace"


@pytest.mark.parametrize(("change", "field"), [
    ({"signal": "xid", "match": "", "state": "drain", "threshold": "1"}, "match"),
    ({"signal": "xid", "match": "79x", "state": "drain", "threshold": "1"}, "match"),
    ({"signal": "pcie_replays", "match": "x", "state": "watch", "threshold": "1"}, "match"),
    ({"signal": "gremlins", "match": "", "state": "watch", "threshold": "1"}, "signal"),
    ({"signal": "xid", "match": "79", "state": "healthy", "threshold": "1"}, "state"),
    ({"signal": "xid", "match": "79", "state": "drain", "threshold": "0"}, "threshold"),
    ({"signal": "xid", "match": "79", "state": "drain", "threshold": "NaN"}, "threshold"),
    ({"signal": "xid", "match": "79", "state": "drain", "threshold": 1.5}, "threshold"),
    ({"signal": "thermal_violation", "match": "", "state": "watch", "threshold": "101"}, "threshold"),
    ({"signal": "node_condition", "match": "Gpu Mem", "state": "drain", "threshold": "1"}, "match"),
])
def test_bad_rules_are_refused_naming_the_field(change, field) -> None:
    before = list(HealthRule.objects.values_list("signal", "match", "state", "threshold"))
    with pytest.raises(ActionError) as caught:
        set_rule(**change)
    assert list(caught.value.errors) == [field]
    assert list(HealthRule.objects.values_list("signal", "match", "state", "threshold")) == before
    assert not AuditEvent.objects.filter(action="nodehealth.rule_set").exists()


@pytest.mark.parametrize(("change", "field"), [
    ({"max_nodes": "-1"}, "max_nodes"), ({"max_percent": "101"}, "max_percent"),
    ({"max_percent": "abc"}, "max_percent"), ({"window_minutes": "0"}, "window_minutes"),
    ({"dry_run": "yes"}, "dry_run"),
])
def test_bad_limits_are_refused(change, field) -> None:
    with pytest.raises(ActionError) as caught:
        set_policy(**change)
    assert list(caught.value.errors) == [field]
    assert RemediationPolicy.current().dry_run is True


def test_cli_tunes_the_table() -> None:
    call_command("fleet", "health-rules", "set", "--signal", "xid", "--match", "79", "--state", "drain",
                 "--threshold", "3")
    assert HealthRule.objects.get(signal="xid", match="79", state="drain").threshold == Decimal(3)
    with pytest.raises(CommandError, match="threshold"):
        call_command("fleet", "health-rules", "set", "--signal", "xid", "--match", "79", "--state", "drain",
                     "--threshold", "-2")
    call_command("fleet", "health-policy", "--dry-run", "off", "--max-nodes", "2")
    policy = RemediationPolicy.current()
    assert (policy.dry_run, policy.max_nodes) == (False, 2)
    assert AuditEvent.objects.filter(action="nodehealth.policy_set").get().before["dry_run"] is True
