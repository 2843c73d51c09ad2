"""Default data: priority classes and SLA tiers (seeded by migration 0003; platform admins may edit).

Kept as plain data so the migration, the docs and the tests read the same numbers.
"""

from __future__ import annotations

# name, value, description. Kueue compares values: higher preempts lower (withinClusterQueue and
# borrowWithinCohort); KAI uses the same value as the queue priority.
PRIORITY_CLASSES = [
    ("low", 100, "preemptible batch work"),
    ("standard", 500, "the default for every tenant"),
    ("high", 1000, "production inference and deadline training"),
]
DEFAULT_PRIORITY_CLASS = "standard"

# name -> SlaTier fields. Cron expressions run in GPUFLEET_BUSINESS_TIMEZONE.
SLA_TIERS = {
    "critical": {
        "min_replicas": 1, "max_replicas": 8, "cooldown_seconds": 300, "polling_seconds": 15,
        "prewarm_start": "", "prewarm_end": "", "prewarm_replicas": 1,
        "description": "always at least one warm replica; never scales to zero",
    },
    "standard": {
        "min_replicas": 0, "max_replicas": 4, "cooldown_seconds": 900, "polling_seconds": 30,
        # Warm up 30 minutes before business hours (Mon-Fri 08:00-18:00) so the first request of the
        # day does not wait for a cold GPU node and model load.
        "prewarm_start": "30 7 * * 1-5", "prewarm_end": "0 18 * * 1-5", "prewarm_replicas": 1,
        "description": "scales to zero; pre-warmed before business hours",
    },
    "batch": {
        "min_replicas": 0, "max_replicas": 4, "cooldown_seconds": 3600, "polling_seconds": 60,
        # A nightly batch window (00:00-06:00) is what wakes it: at zero replicas vLLM exports no queue depth,
        # so the queue triggers read 0 and never activate (scheduling.actions.set_sla_tier refuses such a tier;
        # migration 0010 gives an existing batch row this window).
        "prewarm_start": "0 0 * * *", "prewarm_end": "0 6 * * *", "prewarm_replicas": 1,
        "description": "runs in the nightly batch window (00:00-06:00) and while busy; scales to zero after "
                       "an hour idle",
    },
}


def ensure_rows() -> None:
    """Create any missing default priority class or tier. Migration 0003 seeds them; this covers a
    database emptied since (a test flush, a hand cleanup) so that 'standard' always means something.
    Never changes an existing row."""
    from .models import PriorityClass, SlaTier

    if PriorityClass.objects.count() < len(PRIORITY_CLASSES):
        for name, value, description in PRIORITY_CLASSES:
            PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "description": description})
    if SlaTier.objects.filter(name__in=SLA_TIERS).count() < len(SLA_TIERS):
        for name, fields in SLA_TIERS.items():
            SlaTier.objects.get_or_create(name=name, defaults=fields)
