"""Periodic node-health pass: assess, then carry the plan out (in dry-run: record it). Thin and idempotent:
a pass that finds everything done does nothing; one lost pass is made up by the next."""

from __future__ import annotations

from celery import shared_task

from gpufleet.audit.context import acting


@shared_task(name="nodehealth.remediate", acks_late=True)
def remediate_fleet() -> int:
    from django.db import connection

    from . import kube
    from .remediation import assess, remediate

    # One pass at a time across workers: two passes could both start a remediation within the limits.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [NODE_HEALTH_LOCK])
        got = bool(cursor.fetchone()[0])
    if not got:
        return 0
    try:
        with acting(task="nodehealth.remediate"):
            ops = kube.cluster_ops()
            return len(remediate(assess(None, ops=ops, metrics=kube.metrics_client()), ops))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [NODE_HEALTH_LOCK])


NODE_HEALTH_LOCK = 0x6E6F6465  # "node": one fixed number, the same in every process
