"""The RollingSync part of tests/clusters/bootstrap_model.py against argo-cd's own unit tests at v3.5.1 (issue 26
review F8): each case below is transcribed from the upstream test it cites, so the model the bootstrap-order
tests run on selects, orders and retries as the ApplicationSet controller does."""

from __future__ import annotations

import pytest

from .bootstrap_model import (
    HEALTHY,
    PENDING,
    PROGRESSING,
    WAITING,
    apps_to_sync,
    next_status,
    rolling_steps,
    sync_operation,
)

UPSTREAM = "argoproj/argo-cd@v3.5.1:applicationset/progressivesync/progressive_sync_test.go"
DEPENDENCIES = "argoproj/argo-cd@v3.5.1:applicationset/controllers/progressive_sync_dependencies_test.go"


def app_set(*steps: list[dict]) -> dict:
    return {"spec": {"strategy": {"type": "RollingSync", "rollingSync": {"steps": [
        {"matchExpressions": expressions} for expressions in steps]}}}}


def expr(key: str, operator: str, *values: str) -> dict:
    return {"key": key, "operator": operator, "values": list(values)}


# TestBuildAppDependencyList, progressive_sync_test.go:22-761 (case: line of its name).
STEP_CASES = {
    "100 one 'In' selector selects one application": (
        app_set([expr("env", "In", "dev")]), [("app-dev", {"env": "dev"})], [["app-dev"]]),
    "145 'In' selectors that select no applications": (
        app_set([expr("env", "In", "dev")], [expr("env", "In", "qa")], [expr("env", "In", "prod")]),
        [("app-qa", {"env": "qa"}), ("app-prod", {"env": "prod"})], [[], ["app-qa"], ["app-prod"]]),
    "223 several 'In' expressions must all match": (
        app_set([expr("region", "In", "us-east-2"), expr("env", "In", "qa")]),
        [("app-qa1", {"env": "qa"}), ("app-qa2", {"env": "qa", "region": "us-east-2"})], [["app-qa2"]]),
    "284 several values in one 'In' match any": (
        app_set([expr("env", "In", "qa", "prod")]),
        [("app-dev", {"env": "dev"}), ("app-qa", {"env": "qa"}), ("app-prod", {"env": "prod", "region": "us-east-2"})],
        [["app-qa", "app-prod"]]),
    "382 one 'NotIn' selector": (app_set([expr("env", "NotIn", "qa")]), [("app-dev", {"env": "dev"})], [["app-dev"]]),
    "427 'NotIn' selects the others": (
        app_set([expr("env", "NotIn", "dev")]), [("app-qa", {"env": "qa"}), ("app-prod", {"env": "prod"})],
        [["app-qa", "app-prod"]]),
    "481 'NotIn' expressions remove applications with missing labels on any match": (
        app_set([expr("region", "NotIn", "us-east-2"), expr("env", "NotIn", "qa")]),
        [("app-qa1", {"env": "qa"}), ("app-qa2", {"env": "qa", "region": "us-east-2"})], [[]]),
    "540 'NotIn' expressions filter all matching applications": (
        app_set([expr("region", "NotIn", "us-east-2"), expr("env", "NotIn", "qa")]),
        [("app-qa1", {"env": "qa", "region": "us-east-1"}), ("app-qa2", {"env": "qa", "region": "us-east-2"}),
         ("app-prod1", {"env": "prod", "region": "us-east-1"}), ("app-prod2", {"env": "prod", "region": "us-east-2"})],
        [["app-prod1"]]),
    "620 several values in one 'NotIn' exclude any": (
        app_set([expr("env", "NotIn", "qa", "prod")]),
        [("app-dev", {"env": "dev"}), ("app-qa", {"env": "qa"}), ("app-prod", {"env": "prod", "region": "us-east-2"})],
        [["app-dev"]]),
    "683 'NotIn' takes precedence over 'In'": (
        app_set([expr("env", "In", "qa", "prod"), expr("region", "NotIn", "us-west-2")]),
        [("app-dev", {"env": "dev"}), ("app-qa1", {"env": "qa", "region": "us-west-2"}),
         ("app-qa2", {"env": "qa", "region": "us-east-2"})], [["app-qa2"]]),
}


@pytest.mark.parametrize("case", sorted(STEP_CASES))
def test_steps_select_applications_by_label_as_upstream(case: str) -> None:
    appset, apps, expected = STEP_CASES[case]
    assert rolling_steps(appset, apps) == expected, f"{UPSTREAM}:{case.split()[0]}"


def test_all_at_once_and_no_strategy_have_no_steps() -> None:
    """progressive_sync_test.go:36 and :49."""
    assert rolling_steps({"spec": {}}, []) == []
    assert rolling_steps({"spec": {"strategy": {"type": "AllAtOnce"}}}, [("a", {})]) == []


# TestGetAppsToSync, progressive_sync_test.go:763-1180: (steps, statuses, current apps, expected).
TO_SYNC_CASES = {
    "777 an empty app dependency list": ([], {}, set(), {}),
    "803 missing applications with statuses": (
        [["app1"], ["app2"]], {"app1": HEALTHY, "app2": HEALTHY}, {"app2"}, {"app1": True}),
    "849 new applications with no statuses": ([["app1"], ["app2"]], {}, {"app1", "app2"}, {"app1": True}),
    "884 an empty step is completed": ([[], ["app1", "app2"]], {}, {"app1", "app2"}, {"app1": True, "app2": True}),
    "920 healthy steps": (
        [["app1", "app2"], ["app3", "app4"]], dict.fromkeys(("app1", "app2", "app3", "app4"), HEALTHY),
        {"app1", "app2", "app3", "app4"}, dict.fromkeys(("app1", "app2", "app3", "app4"), True)),
    "980 waiting steps are not completed": (
        [["app1"], ["app2"]], {"app1": WAITING, "app2": HEALTHY}, {"app1", "app2"}, {"app1": True}),
    "1027 pending steps are not completed": (
        [["app1"], ["app2"]], {"app1": PENDING, "app2": HEALTHY}, {"app1", "app2"}, {"app1": True}),
    "1074 progressing steps are not completed": (
        [["app1"], ["app2"]], {"app1": PROGRESSING, "app2": HEALTHY}, {"app1", "app2"}, {"app1": True}),
    "1121 applications not selected are ignored": (
        [["app1"], ["app2"]], {"old_app": PROGRESSING, "app1": HEALTHY, "app2": HEALTHY}, {"old_app", "app1", "app2"},
        {"app1": True, "app2": True}),
}


@pytest.mark.parametrize("case", sorted(TO_SYNC_CASES))
def test_a_step_syncs_only_after_every_earlier_step_is_healthy_as_upstream(case: str) -> None:
    steps, statuses, current, expected = TO_SYNC_CASES[case]
    assert apps_to_sync(steps, statuses, current) == expected, f"{UPSTREAM}:{case.split()[0]}"


# TestUpdateApplicationSetApplicationStatus, progressive_sync_dependencies_test.go:27-925:
# (status, revision changed, synced, healthy, operation started since Pending) -> next status.
STATUS_CASES = {
    "148 a waiting application that is synced and healthy is Healthy": ((WAITING, False, True, True, True), HEALTHY),
    "195 a new revision already in sync stays Healthy": ((HEALTHY, True, True, True, True), HEALTHY),
    "223 a new revision out of sync waits": ((HEALTHY, True, False, True, False), WAITING),
    "353 a pending application whose sync failed is Progressing": ((PENDING, False, False, True, True), PROGRESSING),
    "541 a progressing application synced and healthy is Healthy": ((PROGRESSING, False, True, True, True), HEALTHY),
    "569 a progressing application synced but degraded stays Progressing": (
        (PROGRESSING, False, True, False, True), PROGRESSING),
}


@pytest.mark.parametrize("case", sorted(STATUS_CASES))
def test_application_status_moves_as_upstream(case: str) -> None:
    (status, changed, synced, healthy, started), expected = STATUS_CASES[case]
    assert next_status(status, revision_changed=changed, synced=synced, healthy=healthy,
                       operation_since_pending=started) == expected, f"{DEPENDENCIES}:{case.split()[0]}"


def test_the_sync_operation_takes_the_applications_retry_or_a_limit_of_five() -> None:
    """TestSyncApplication, progressive_sync_test.go:1252 and :1280."""
    assert sync_operation({}, False)["retry"] == {"limit": 5}
    operation = sync_operation({"syncPolicy": {"retry": {"limit": 10}, "syncOptions": ["CreateNamespace=true"]}}, True)
    assert operation["retry"] == {"limit": 10}
    assert operation["sync"] == {"syncOptions": ["CreateNamespace=true"], "prune": True}
    assert operation["initiatedBy"] == {"username": "applicationset-controller", "automated": True}
