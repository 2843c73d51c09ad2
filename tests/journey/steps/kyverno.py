"""Kyverno v1.19.0: the tenant namespace's Policies, mutate rules then validate rules, evaluated by
tests/isolation/kyverno_eval.py (its docstring lists what is and is not evaluated). A refusal carries
the rule's message, as `kubectl` shows it to the tenant."""

from __future__ import annotations

from typing import Any

from tests.isolation import kyverno_eval

from . import StepResult


def mutate(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    pod, applied = host_pod, []
    for policy in fleet.objects("Policy", host_pod["metadata"]["namespace"]):
        pod, rules = kyverno_eval.mutate(policy, pod)
        applied.extend(rules)
    return StepResult(True, f"mutated by {applied}" if applied else "no mutation", pod, {"rules": applied})


def validate(host_pod: dict[str, Any], fleet: Any) -> StepResult:
    for policy in fleet.objects("Policy", host_pod["metadata"]["namespace"]):
        decision = kyverno_eval.admit(policy, host_pod)
        if not decision.allowed:
            return StepResult(False, f"admission webhook \"validate.kyverno.svc-fail\" denied the request: "
                              f"{decision.message}", host_pod, {"rule": decision.rule})
    return StepResult(True, "Kyverno validation passed", host_pod)
