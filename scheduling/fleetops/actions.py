"""Writes of fleet operations: notices to a tenant's owners and applying scale-to-zero. Each is one
transaction with one AuditEvent; the webhook is sent by a task through the outbox. Nothing here stops
or deletes a workload."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from gpufleet import clock
from gpufleet.audit.record import record
from gpufleet.core.errors import ActionError
from gpufleet.outbox import send as outbox
from scheduling import actions as scheduling_actions
from scheduling.models import InferenceEndpoint, SlaTier
from tenants.models import Tenant

from .models import FleetSettings, IdleNotice

NOTICE_FIELDS = ("namespace", "pod", "flavor", "start", "idle_seconds", "memory_mib", "signal")


def notify_owners(tenant: Tenant, finding: Any) -> IdleNotice:
    """A portal notice to the tenant's owners about one idle finding, and the admin's webhook (if set)."""
    if not isinstance(finding, dict):
        raise ActionError({"finding": ["must be an object with the finding's fields"]})
    missing = [name for name in NOTICE_FIELDS if finding.get(name) in (None, "")]
    if missing:
        raise ActionError({"finding": [f"missing {', '.join(missing)}"]})
    if finding.get("namespace") != f"tenant-{tenant.slug}":
        raise ActionError({"finding": [f"namespace {finding.get('namespace')!r} is not tenant {tenant.slug!r}'s"]})
    idle = finding["idle_seconds"]
    if isinstance(idle, bool) or not isinstance(idle, int) or idle < 0:  # int("abc") was a 500
        raise ActionError({"finding.idle_seconds": ["must be a whole number of seconds, at least 0"]})
    kept = {k: finding.get(k) for k in (*NOTICE_FIELDS, "end", "cost", "currency", "gpu_equivalent_seconds")}
    hours = idle / 3600
    message = (f"{finding['pod']} held a {finding['flavor']} GPU idle for {hours:.1f} h from {finding['start']} "
               f"({finding['memory_mib']} MiB held; signal {finding['signal']}). Scale it down or release it.")
    with transaction.atomic():
        notice = IdleNotice.objects.create(tenant=tenant, finding=kept, message=message[:500], created=clock.now())
        record("fleet.idle_notice", notice, after={"finding": kept}, tenant_slug=tenant.slug)
        if FleetSettings.current().webhook_url:
            outbox.enqueue("scheduling.fleetops.tasks.send_idle_webhook", notice.pk)
    return notice


def scale_to_zero(endpoint: InferenceEndpoint, tier: Any) -> InferenceEndpoint:
    """Move an inference endpoint to an SLA tier that scales to zero (min_replicas 0)."""
    row = SlaTier.objects.filter(name=tier).first() if isinstance(tier, str) else None
    if row is None:
        raise ActionError({"tier": [f"unknown SLA tier {tier!r}"]})
    if row.min_replicas != 0:
        raise ActionError({"tier": [f"tier {row.name!r} keeps {row.min_replicas} replicas; "
                                    "pick one that scales to zero"]})
    with transaction.atomic():
        before = scheduling_actions.endpoint_snapshot(endpoint)
        tenant = scheduling_actions._writable(endpoint.tenant)
        endpoint.tier = row
        endpoint.save(update_fields=["tier"])
        scheduling_actions._bump(tenant)
        record("endpoint.scale_to_zero", endpoint, before=before,
               after=scheduling_actions.endpoint_snapshot(endpoint), tenant_slug=tenant.slug)
        scheduling_actions._enqueue_tenant(tenant)
    return endpoint
