"""gpufleet.k8s_names: the Kubernetes identifier rules, full match, per field; and every action that creates a
named object refuses a bad name with a 400-style ActionError naming the field, writing nothing."""

from __future__ import annotations

import pytest

from gpufleet import k8s_names
from gpufleet.audit.models import AuditEvent
from gpufleet.core.errors import ActionError
from scheduling import actions
from scheduling.models import Cohort, Flavor, GpuModel, GpuNodePool, InferenceEndpoint, SlaTier
from tenants.models import Phase
from tests.support import factories

# Bad under every rule: not strings, whitespace and control characters anywhere (a trailing newline above
# all: `re.match("...$")` accepted it), non-ASCII look-alikes.
EVERYWHERE_BAD = [123, 1.5, True, None, ["a"], "abc\n", "ab\nc", "abc\r", " abc", "abc ", "a\tb", "a\x00b",
                  "a\x7fb", "abc\u00a0", "abc\u0085", "\u0430bc", "abc\u2028"]

RULES = {
    "dns1123_label": (k8s_names.dns1123_label,
                      ["a", "abc", "a-b", "0abc", "a" * 63],
                      ["", "A", "-a", "a-", "a.b", "a_b", "a" * 64]),
    "dns1123_subdomain": (k8s_names.dns1123_subdomain,
                          ["a", "nvidia.com", "a-b.c-d", "a" * 63 + "." + "b" * 63],
                          ["", "A.b", ".a", "a.", "a..b", "a_b.c", ("a" * 63 + ".") * 4 + "a"]),
    "label_key": (k8s_names.label_key,
                  ["a", "gpu.product", "nvidia.com/gpu.product", "A_b-c.D", "x/" + "y" * 63],
                  ["", "/a", "a/", "Nvidia.com/x", "a/b/c", "-a", "a_", "x/" + "y" * 64, "a b"]),
    "label_value": (k8s_names.label_value,
                    ["", "a", "NVIDIA-H100-80GB-HBM3", "a.b_c-d", "x" * 63],
                    ["-a", "a-", "a/b", "x" * 64, "a b", "ä"]),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_accepts_good_and_refuses_bad(rule) -> None:
    check, good, bad = RULES[rule]
    for value in good:
        assert check(value) == [], (rule, value)
    for value in [*bad, *EVERYWHERE_BAD]:
        if rule == "label_value" and value == "":
            continue
        assert check(value), (rule, value)


def test_reasons_name_the_problem() -> None:
    assert k8s_names.dns1123_label("abc\n") == ["must not contain whitespace or control characters"]
    assert k8s_names.dns1123_label("\u0430bc") == ["must contain only ASCII characters (no look-alike letters)"]
    assert k8s_names.dns1123_label(123) == ["must be a string, not a number"]
    assert k8s_names.dns1123_label("Abc") == ["must be lowercase"]


@pytest.mark.parametrize(("taint", "ok"), [
    ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "effect": "NoExecute"}, True),
    ({"key": "nvidia.com/gpu\n", "value": "x", "effect": "NoSchedule"}, False),
    ({"key": "nvidia.com/gpu", "value": "a b", "effect": "NoSchedule"}, False),
    ({"key": "nvidia.com/gpu", "value": "x", "effect": "Sometimes"}, False),
    ({"key": "nvidia.com/gpu", "value": "x", "effect": "NoSchedule", "extra": 1}, False),
    ({"key": "", "effect": "NoSchedule"}, False),
    ("nvidia.com/gpu=x:NoSchedule", False),
])
def test_taint_rule(taint, ok) -> None:
    assert (k8s_names.taint(taint) == []) is ok


@pytest.mark.parametrize(("toleration", "ok"), [
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "dedicated", "operator": "Equal", "value": "gpu"}, True),
    ({"operator": "Exists"}, True),
    ({"key": "", "operator": "Equal", "value": "x"}, False),
    ({"key": "a", "operator": "Exists", "value": "x"}, False),
    ({"key": "a", "operator": "Maybe"}, False),
    ({"key": "a\n", "operator": "Exists"}, False),
    ({"key": "a", "operator": "Exists", "tolerationSeconds": "60"}, False),
])
def test_toleration_rule(toleration, ok) -> None:
    assert (k8s_names.toleration(toleration) == []) is ok


# --- every action that names a Kubernetes object ------------------------------------------------------

BAD_NAMES = ["abc\n", "Abc", "a_b", "\u0430bc", "a b", 123, ""]


@pytest.fixture
def catalog(db):
    model = actions.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    actions.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=4)
    return model


def _refused(call, field: str, table, *, count) -> None:
    before = (count(), AuditEvent.objects.count())
    with pytest.raises(ActionError) as excinfo:
        call()
    assert field in excinfo.value.errors, excinfo.value.errors
    assert (count(), AuditEvent.objects.count()) == before, table


@pytest.mark.django_db
@pytest.mark.parametrize("bad", BAD_NAMES)
def test_object_names_are_refused_by_every_action(catalog, bad) -> None:
    tenant = factories.tenant("acme", "trusted", phase=Phase.READY)
    _refused(lambda: actions.create_gpu_model(bad, "NVIDIA X", 1024), "name", "gpu model", count=GpuModel.objects.count)
    _refused(lambda: actions.create_flavor(bad, gpu_model="h100-80gb", mode="whole"), "name", "flavor",
             count=Flavor.objects.count)
    _refused(lambda: actions.create_cohort(bad), "name", "cohort", count=Cohort.objects.count)
    _refused(lambda: actions.create_node_pool(bad, flavor="h100", gpu_limit=1), "name", "node pool",
             count=GpuNodePool.objects.count)
    _refused(lambda: actions.set_sla_tier(bad, min_replicas=0), "name", "tier", count=SlaTier.objects.count)
    _refused(lambda: actions.create_endpoint(tenant, bad, model="m", tier="standard"), "name", "endpoint",
             count=InferenceEndpoint.objects.count)
    if bad != "":  # an empty deployment means "named like the endpoint"
        _refused(lambda: actions.create_endpoint(tenant, "ep", model="m", tier="standard", deployment=bad),
                 "deployment", "endpoint deployment", count=InferenceEndpoint.objects.count)


@pytest.mark.django_db
@pytest.mark.parametrize(("kwargs", "field"), [
    ({"node_labels": {"nvidia.com/gpu.product\n": "x"}}, "node_labels"),
    ({"node_labels": {"nvidia.com/gpu.product": "H100\n"}}, "node_labels"),
    ({"node_labels": {"nvidia.com/gpu.product": 100}}, "node_labels"),
    ({"taints": [{"key": "gpu\n", "effect": "NoSchedule"}]}, "taints"),
    ({"taints": [{"key": "gpu", "value": "\u0430", "effect": "NoSchedule"}]}, "taints"),
    ({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "a b"}]}, "tolerations"),
    ({"tolerations": "gpu"}, "tolerations"),
    ({"mode": "mig", "mig_profile": "3g.40gb\n"}, "mig_profile"),
])
def test_flavor_labels_taints_and_tolerations(catalog, kwargs, field) -> None:
    kwargs = {"mode": "whole", **kwargs}
    _refused(lambda: actions.create_flavor("h100-b", gpu_model="h100-80gb", **kwargs), field, kwargs,
             count=Flavor.objects.count)


@pytest.mark.django_db
@pytest.mark.parametrize(("kwargs", "field"), [
    ({"node_label_value": "NVIDIA-H100\n"}, "node_label_value"),
    ({"dcgm_model_name": 'NVIDIA"} or vector(1) #'}, "dcgm_model_name"),
    ({"dcgm_model_name": "NVIDIA H100\n"}, "dcgm_model_name"),
])
def test_gpu_model_label_and_metric_names(db, kwargs, field) -> None:
    args = {"dcgm_model_name": "NVIDIA H200", "memory_mib": 1024, **kwargs}
    _refused(lambda: actions.create_gpu_model("h200", **args), field, kwargs, count=GpuModel.objects.count)


@pytest.mark.django_db
def test_node_pool_instance_types_are_label_values(catalog) -> None:
    _refused(lambda: actions.create_node_pool("pool", flavor="h100", gpu_limit=1, instance_types=["p5.48xlarge\n"]),
             "instance_types", "instance types", count=GpuNodePool.objects.count)


def test_egress_fqdn_patterns_are_full_matches() -> None:
    from tenants.isolation.egress import fqdn_errors

    assert fqdn_errors(["api.example.com", "*.example.com"]) == []
    for bad in ["api.example.com\n", "api.example.com ", "\u0430pi.example.com"]:
        assert fqdn_errors([bad]), bad
