"""A small evaluator for the subset of Kyverno our GPU policy uses, to test the rule's logic.

Evaluated: `match.any[].resources.kinds` / `operations`, the policy's own namespace (a namespaced
Policy only sees its namespace), `validate.deny.conditions.any|all` and `preconditions.any|all` with
keys written as `{{ <JMESPath> }}` (standard JMESPath via the `jmespath` package, incl. `||`, backtick
and raw-string literals), the operators AnyIn / AnyNotIn / AllIn / AllNotIn / Equals / GreaterThan (numbers)
with Kyverno's
`*`/`?` wildcards in values, and `mutate.patchStrategicMerge` for maps and scalars (`mutate()`; maps
merge key by key, a scalar replaces; Kyverno v1.19.0 applies mutate rules in order, each on the
previous rule's output).

NOT evaluated (an error is raised if a policy uses them): `exclude`, `context`, `foreach`,
`pattern`/`anyPattern`, CEL, Kyverno's custom JMESPath functions, namespaceSelector, subjects/roles,
background scans, JSON patches, strategic-merge of lists and anchors. Kyverno's JMESPath dialect is
assumed to agree with the standard one for the expressions we render (projection, keys(), flatten, `||`).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

import jmespath

_VAR = re.compile(r"^\{\{\s*(.+?)\s*\}\}$")
SUPPORTED_RULE_KEYS = {"name", "match", "validate", "preconditions", "mutate"}
SUPPORTED_VALIDATE_KEYS = {"message", "deny", "failureAction"}


@dataclass(frozen=True)
class Decision:
    allowed: bool
    rule: str = ""
    message: str = ""


def _value(key: Any, request: dict[str, Any]) -> Any:
    if isinstance(key, str) and (m := _VAR.match(key)):
        return jmespath.search(m.group(1), {"request": request})
    return key


def _wild(pattern: Any, value: Any) -> bool:
    if isinstance(pattern, str) and isinstance(value, str):
        return fnmatch.fnmatchcase(value, pattern)
    return pattern == value


def _condition(cond: dict[str, Any], request: dict[str, Any]) -> bool:
    key = _value(cond["key"], request)
    values = cond.get("value")
    values = values if isinstance(values, list) else [values]
    keys = key if isinstance(key, list) else [key]
    op = cond["operator"]
    if op == "AnyIn":
        return any(any(_wild(v, k) for v in values) for k in keys)
    if op == "AllIn":
        return all(any(_wild(v, k) for v in values) for k in keys)
    if op == "AnyNotIn":
        return any(not any(_wild(v, k) for v in values) for k in keys)
    if op == "AllNotIn":
        return all(not any(_wild(v, k) for v in values) for k in keys)
    if op == "Equals":
        return key == cond.get("value")
    if op == "GreaterThan":
        # Kyverno compares numbers as numbers (pkg/engine/variables/operator/numeric.go, v1.19.0; it also
        # parses quantities and durations, which our policies never compare).
        value = cond.get("value")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (key, value)):
            raise NotImplementedError(f"GreaterThan of {key!r} and {value!r} is not evaluated here")
        return key > value
    raise NotImplementedError(f"operator {op} is not evaluated here")


def _matches(rule: dict[str, Any], request: dict[str, Any]) -> bool:
    for block in rule["match"].get("any", []):
        res = block["resources"]
        if request["kind"]["kind"] in res.get("kinds", []) and (
            "operations" not in res or request["operation"] in res["operations"]
        ):
            return True
    return False


def _conditions_hold(block: dict[str, Any], request: dict[str, Any]) -> bool:
    """Kyverno's any/all: every `all` condition and (if any are given) at least one `any` condition."""
    any_of, all_of = block.get("any"), block.get("all")
    return (all(_condition(c, request) for c in all_of) if all_of else True) and (
        any(_condition(c, request) for c in any_of) if any_of else True)


def _merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if isinstance(value, list):
                raise NotImplementedError("strategic merge of lists is not evaluated here")
            out[key] = _merge(base.get(key), value)
        return out
    return patch


def mutate(policy: dict[str, Any], pod: dict[str, Any], operation: str = "CREATE") -> tuple[dict[str, Any], list[str]]:
    """The pod after the policy's mutate rules, and the names of the rules that changed it."""
    assert policy["kind"] == "Policy", "only namespaced Policies are evaluated"
    namespace = policy["metadata"]["namespace"]
    if pod["metadata"].get("namespace", namespace) != namespace:
        return pod, []
    applied = []
    for rule in policy["spec"]["rules"]:
        if "mutate" not in rule:
            continue
        request = {"operation": operation, "kind": {"kind": pod["kind"]}, "object": pod, "namespace": namespace}
        if set(rule) - SUPPORTED_RULE_KEYS or set(rule["mutate"]) != {"patchStrategicMerge"}:
            raise NotImplementedError(f"rule {rule['name']} is not evaluated here")
        if not _matches(rule, request) or not _conditions_hold(rule.get("preconditions", {}), request):
            continue
        changed = _merge(pod, rule["mutate"]["patchStrategicMerge"])
        if changed != pod:
            applied.append(rule["name"])
        pod = changed
    return pod, applied


def admit(policy: dict[str, Any], pod: dict[str, Any], operation: str = "CREATE") -> Decision:
    assert policy["kind"] == "Policy", "only namespaced Policies are evaluated"
    namespace = policy["metadata"]["namespace"]
    if pod["metadata"].get("namespace", namespace) != namespace:
        return Decision(True)
    request = {"operation": operation, "kind": {"kind": pod["kind"]}, "object": pod, "namespace": namespace}
    for rule in policy["spec"]["rules"]:
        unsupported = set(rule) - SUPPORTED_RULE_KEYS
        unsupported |= set(rule.get("validate", {})) - SUPPORTED_VALIDATE_KEYS
        if unsupported:
            raise NotImplementedError(f"rule {rule['name']} uses {sorted(unsupported)}, not evaluated here")
        if "validate" not in rule:
            continue
        if not _matches(rule, request) or not _conditions_hold(rule.get("preconditions", {}), request):
            continue
        conditions = rule["validate"]["deny"]["conditions"]
        any_of, all_of = conditions.get("any"), conditions.get("all")
        denied = (any(_condition(c, request) for c in any_of) if any_of else False) or (
            all(_condition(c, request) for c in all_of) if all_of else False
        )
        if denied and rule["validate"].get("failureAction", policy["spec"].get("validationFailureAction")) == "Enforce":
            return Decision(False, rule["name"], rule["validate"]["message"])
    return Decision(True)
