"""gpufleet serve: the embedded platform for the demo — web server plus an in-process worker.

Tasks run inside the web process right after the transaction that enqueued them commits
(CELERY_TASK_ALWAYS_EAGER in the demo profile), and a timer thread plays Celery beat's part by
running reconcile_all every GPUFLEET_RECONCILE_ALL_SECONDS.
"""

from __future__ import annotations

import errno
import socket
import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from gpufleet.core import conf
from tenants.tasks import reconcile_all


class Command(GpufleetCommand):
    help = "Serve the portal and API with an in-process worker (the demo profile)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000",
                            help="address and port to listen on, HOST:PORT or PORT (default 127.0.0.1:8000)")
        parser.add_argument("--no-seed", action="store_true", help="do not seed the demo data")

    def handle(self, *args: object, addrport: str, no_seed: bool, **opts: object) -> None:
        check_free(addrport)  # before the migrations and the seed, not after them as runserver would
        call_command("migrate", interactive=False, verbosity=0)
        if not no_seed:
            call_command("demo", url=f"http://{addrport}")
        call_command("reconcile", all=True)
        if settings.CELERY_TASK_ALWAYS_EAGER:
            self._start_beat()
        repo = conf.GITOPS_REPO
        self.stdout.write(f"gpufleet is serving on http://{addrport}/ (GitOps repo: {repo})")
        call_command("runserver", addrport, use_reloader=False)

    def _start_beat(self) -> None:
        interval = float(conf.RECONCILE_ALL_SECONDS)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    reconcile_all.delay()
                except Exception as exc:  # keep beating; the next tick retries
                    self.stderr.write(f"reconcile_all failed: {exc}")

        threading.Thread(target=beat, name="gpufleet-beat", daemon=True).start()


def check_free(addrport: str) -> None:
    """Refuse a port something already listens on, saying how to pick another (`make demo PORT=...`)."""
    host, _, port_text = addrport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError as exc:
        raise CommandError(f"addrport: {addrport!r} is not HOST:PORT or PORT") from exc
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As runserver binds (SO_REUSEADDR): connections closing in TIME_WAIT do not count, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
            raise CommandError(
                f"port {port} on {host} is already in use (another gpufleet serve or program listens there). "
                f"Pick another: make demo PORT={port + 100}, or gpufleet serve {host}:{port + 100}") from exc
