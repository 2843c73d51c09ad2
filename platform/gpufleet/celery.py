"""The Celery application. Tasks live in each app's tasks.py and take ids, never model instances."""

from __future__ import annotations

from celery import Celery

from gpufleet.core import conf
from gpufleet.profile import require_settings_module

require_settings_module("gpufleet.celery")  # never the demo profile by default (profile.py says why)

app = Celery("gpufleet")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["scheduling"], related_name="sync")
import gpufleet.observability.celery  # noqa: E402,F401 - connects the task-duration signals  # scheduling.sync_fleet lives in scheduling/clusters/sync.py


@app.on_after_finalize.connect
def _schedule_periodic(sender: Celery, **_: object) -> None:
    # Level-triggered repair: whatever a lost message or a manual edit left behind is fixed here.
    sender.add_periodic_task(
        float(conf.RECONCILE_ALL_SECONDS),
        sender.signature("tenants.reconcile_all"),
        name="reconcile all tenants",
    )
    # Transactional outbox (gpufleet.outbox): work recorded while the broker was down is sent when it is back.
    sender.add_periodic_task(
        float(conf.OUTBOX_RELAY_SECONDS), sender.signature("outbox.relay"), name="relay the task outbox"
    )
    # Fleet sync (scheduling/clusters/sync.py): re-apply platform and tenants, repair and count drift, record a SyncRun.
    sender.add_periodic_task(
        float(conf.SYNC_FLEET_SECONDS),
        sender.signature("scheduling.sync_fleet"),
        name="sync the fleet (drift repair)",
    )
    # Quota review: simulations whose task message was lost (the pending row is the outbox).
    sender.add_periodic_task(300.0, sender.signature("scheduling.sweep_quota_simulations"),
                             name="sweep pending quota simulations")
    # Node health (scheduling.nodehealth): classify GPU nodes, carry out remediation within the limits
    # (a new fleet is in dry-run: the pass only records what it would do).
    if float(conf.NODE_HEALTH_SECONDS or 0) > 0:
        sender.add_periodic_task(float(conf.NODE_HEALTH_SECONDS), sender.signature("nodehealth.remediate"),
                                 name="node health pass")
    # Billing: collect the last settled hours every hour; draft last month's invoices on the 1st.
    from celery.schedules import crontab

    sender.add_periodic_task(crontab(minute=5), sender.signature("billing.collect_recent"),
                             name="collect GPU usage")
    # Fleet operations: hourly roll-ups of idle slots and utilisation, once each hour has settled.
    sender.add_periodic_task(crontab(minute=25), sender.signature("scheduling.fleetops.tasks.rollup_recent"),
                             name="roll up fleet idle and utilisation hours")
    sender.add_periodic_task(crontab(minute=30, hour=1, day_of_month=1),
                             sender.signature("billing.draft_previous_month"), name="draft monthly invoices")
