"""Admin changes to the classification table and the remediation limits: validated, audited, atomic."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction

from gpufleet.audit.record import record
from gpufleet.core.errors import ActionError

from .models import HealthRule, RemediationPolicy
from .rules import RuleError, validate_rule


def _invalid(field: str, reason: str) -> ActionError:
    return ActionError({field: [reason]})


def rule_json(rule: HealthRule) -> dict[str, Any]:
    return {"id": rule.pk, "signal": rule.signal, "match": rule.match, "threshold": str(rule.threshold),
            "state": rule.state, "description": rule.description, "enabled": rule.enabled}


def set_rule(*, signal: Any, match: Any, state: Any, threshold: Any, description: Any = None,
             enabled: Any = True) -> HealthRule:
    """Create or change the rule for (signal, match, state)."""
    try:
        rule = validate_rule(signal, match, threshold, state)
    except RuleError as exc:
        raise _invalid(exc.field, exc.reason) from exc
    if not isinstance(enabled, bool):
        raise _invalid("enabled", "true or false")
    if description is not None and (not isinstance(description, str) or len(description) > 300):
        raise _invalid("description", "text of at most 300 characters")
    with transaction.atomic():
        row = HealthRule.objects.select_for_update().filter(signal=rule.signal, match=rule.match,
                                                            state=rule.state).first()
        before = rule_json(row) if row else None
        if row is None:
            row = HealthRule(signal=rule.signal, match=rule.match, state=rule.state)
        row.threshold, row.enabled = rule.threshold, enabled
        if description is not None:
            row.description = description
        row.save()
        record("nodehealth.rule_set", row, before=before, after=rule_json(row))
    return row


def policy_json(policy: RemediationPolicy) -> dict[str, Any]:
    return {"dry_run": policy.dry_run, "max_nodes": policy.max_nodes, "max_percent": str(policy.max_percent),
            "window_minutes": policy.window_minutes}


def set_policy(**changes: Any) -> RemediationPolicy:
    clean: dict[str, Any] = {}
    for field, value in changes.items():
        if value is None:
            continue
        if field == "dry_run":
            if not isinstance(value, bool):
                raise _invalid(field, "true or false")
            clean[field] = value
        elif field in ("max_nodes", "window_minutes"):
            if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
                raise _invalid(field, "a whole number")
            number = int(value)
            if field == "window_minutes" and not 1 <= number <= 7 * 24 * 60:
                raise _invalid(field, "from 1 minute to 7 days")
            if field == "max_nodes" and number > 1000:
                raise _invalid(field, "at most 1000")
            clean[field] = number
        elif field == "max_percent":
            try:
                percent = Decimal(str(value)) if not isinstance(value, bool | float) else None
            except InvalidOperation:
                percent = None
            if percent is None or not percent.is_finite() or not 0 <= percent <= 100:
                raise _invalid(field, "a number from 0 to 100")
            clean[field] = percent.quantize(Decimal("0.01"))
        else:
            raise _invalid(field, "unknown setting")
    with transaction.atomic():
        policy = RemediationPolicy.current()
        policy = RemediationPolicy.objects.select_for_update().get(pk=policy.pk)
        before = policy_json(policy)
        for field, value in clean.items():
            setattr(policy, field, value)
        policy.save()
        record("nodehealth.policy_set", policy, before=before, after=policy_json(policy))
    return policy
