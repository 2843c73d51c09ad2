"""`gpufleet migrate`: Django's migrate, serialised across processes by a PostgreSQL advisory lock.

Two migrate runs at once (two Helm hook Jobs of successive revisions, a Job retried while the old pod
still runs, an operator's manual run) would both apply the same migration: duplicate-table errors at
best, a half-applied schema at worst. The lock is session-level (migrate runs many transactions) on
its own key, apart from the tenant locks (tenants/locks.py). A waiting run says so and gives up after
`--lock-timeout` seconds (keep it under the Job's activeDeadlineSeconds) rather than hanging the hook.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections

# (namespace, key) of the two-integer pg_advisory_lock: outside tenants.locks' 0x67706600..0x677066FF.
MIGRATE_LOCK = (0x6770_6700, 1)
POLL_SECONDS = 1.0


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " One run at a time per database (PostgreSQL advisory lock)."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--lock-timeout", type=float, default=600.0,
            help="seconds to wait for another migrate run to finish before failing (default 600)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        self._acquire(connection, options["lock_timeout"], options["verbosity"])
        try:
            super().handle(*args, **options)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", list(MIGRATE_LOCK))

    def _acquire(self, connection: Any, timeout: float, verbosity: int) -> None:
        # Monotonic time for a wait (a duration, not a date: gpufleet.clock is for "now").
        deadline, announced = time.monotonic() + timeout, False
        while True:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", list(MIGRATE_LOCK))
                if cursor.fetchone()[0]:
                    return
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"another migrate is still running after {timeout:.0f}s (advisory lock {MIGRATE_LOCK}); "
                    "not migrating concurrently"
                )
            if not announced and verbosity:
                self.stdout.write("Waiting for another migrate run to finish (advisory lock)...")
                announced = True
            time.sleep(POLL_SECONDS)
