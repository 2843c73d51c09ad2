"""gpufleet render (--tenant SLUG | --platform): desired state as one sorted YAML stream."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from infra.manifests import to_yaml_stream
from tenants.backends import get_schema_registry
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, render_platform

from ._util import get_tenant


class Command(GpufleetCommand):
    help = "Print the rendered manifests (deterministic, sorted in apply order); nothing is applied."

    def add_arguments(self, parser: CommandParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--tenant", metavar="SLUG")
        group.add_argument("--platform", action="store_true")
        group.add_argument("--sync", choices=["argocd", "flux"],
                           help="what Argo CD (an ApplicationSet per cluster) or Flux (Kustomizations per cluster) "
                                "needs to sync each host cluster's tree")
        parser.add_argument("--repo-url", default="", help="with --sync: the desired-state repository's URL")
        parser.add_argument("--validate", action="store_true", help="also validate against upstream schemas")

    def handle(self, *args: object, **opts: object) -> None:
        ctx = RenderContext.from_settings()
        if opts["sync"]:
            from scheduling.clusters import sync_objects
            from scheduling.models import Cluster

            if not opts["repo_url"]:
                raise CommandError("--sync needs --repo-url (the repository Argo CD or Flux reads)")
            targets = [sync_objects.SyncTarget.of(c) for c in Cluster.objects.all()]
            try:
                manifests = getattr(sync_objects, str(opts["sync"]))(targets, str(opts["repo_url"]))
            except sync_objects.SyncTargetError as exc:  # refuse loudly: never a tree sent to the wrong cluster
                raise CommandError(f"cannot deliver every cluster with {opts['sync']}: {exc}") from exc
        elif opts["platform"]:
            manifests = render_platform(ctx)
        else:
            manifests = desired_manifests(get_tenant(str(opts["tenant"])), ctx)
        if opts["validate"]:
            problems = get_schema_registry().validate(manifests)
            if problems:
                raise CommandError("\n".join(map(str, problems)))
        self.stdout.write(to_yaml_stream(manifests), ending="")
