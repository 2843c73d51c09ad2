"""gpufleet cilium-status: is the network isolation layer healthy? (`cilium status -o json`)."""

from __future__ import annotations

from django.core.management.base import CommandError

from gpufleet.command import GpufleetCommand
from gpufleet.core import conf
from infra.cilium import CiliumCLI
from infra.errors import InfraError

from ._util import dumps


class Command(GpufleetCommand):
    help = "Check Cilium's health with the cilium CLI; exits non-zero when unhealthy or unreachable."

    def handle(self, *args: object, **opts: object) -> None:
        cli = CiliumCLI(timeout=float(conf.HUBBLE_TIMEOUT_SECONDS))
        try:
            health = cli.status()
        except InfraError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(dumps({"ok": health.ok, "problems": list(health.problems),
                                 "components": health.components}))
        if not health.ok:
            raise CommandError("Cilium is not healthy: " + "; ".join(health.problems))
