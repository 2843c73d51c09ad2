"""gpufleet serve: the embedded platform for the demo — web server plus an in-process worker.

Tasks run inside the web process right after the transaction that enqueued them commits
(CELERY_TASK_ALWAYS_EAGER in the demo profile), and a timer thread plays Celery beat's part by
running reconcile_all every GPUFLEET_RECONCILE_ALL_SECONDS.
"""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve the portal and API with an in-process worker (the demo profile)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-seed", action="store_true", help="do not seed the demo data")

    def handle(self, *args: object, addrport: str, no_seed: bool, **opts: object) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        if not no_seed:
            call_command("demo", url=f"http://{addrport}")
        call_command("reconcile", all=True)
        if settings.CELERY_TASK_ALWAYS_EAGER:
            self._start_beat()
        repo = settings.GPUFLEET_GITOPS_REPO
        self.stdout.write(f"gpufleet is serving on http://{addrport}/ (GitOps repo: {repo})")
        call_command("runserver", addrport, use_reloader=False)

    def _start_beat(self) -> None:
        from tenants.tasks import reconcile_all

        interval = float(settings.GPUFLEET_RECONCILE_ALL_SECONDS)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    reconcile_all.delay()
                except Exception as exc:  # keep beating; the next tick retries
                    self.stderr.write(f"reconcile_all failed: {exc}")

        threading.Thread(target=beat, name="gpufleet-beat", daemon=True).start()
