"""gpufleet doctor [--json] [--kubeconfig PATH] [--context NAME]: check a cluster against the matrix.

Read-only: GETs on the Kubernetes API (CRDs, Kueue's manager ConfigMap, ResourceFlavors and ClusterQueues,
HAMi's webhook and device plugin, Karpenter's NodePools and node classes, node labels, the vCluster HelmReleases
and their namespaces, the vCluster CA's ClusterSecretStore), plus the registered clusters' delivery credentials
and the platform tree's bootstrap order (issue 26 blockers, scheduling.doctor_blockers). Per registered cluster
(scheduling.doctor_clusters): a node pool for every GPU flavor it offers, the prerequisite CRDs (Flux, Karpenter,
Cilium, External Secrets, prometheus-operator when on) and Karpenter's NodeOverlay gate -- read through the
cluster's kubeconfig_secret, or "cannot check" when there is none. Exit status 1 when any check fails.
docs/compatibility.md.
"""

from __future__ import annotations

import json

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from gpufleet.core import conf
from infra.errors import InfraError
from infra.kube.backend import KubernetesBackend
from infra.kube.clusters import from_references
from scheduling.clusters.models import DEFAULT_CLUSTER
from scheduling.clusters.sync_objects import SyncTarget
from scheduling.doctor import diagnose
from scheduling.doctor_blockers import blocker_checks
from scheduling.doctor_clusters import Read, Target, cluster_checks
from scheduling.fleetops.models import FleetSettings
from scheduling.inputs import load_catalog
from scheduling.models import Cluster
from tenants.backends import kube_access
from tenants.render import RenderContext, render_platform


class Command(GpufleetCommand):
    help = "Check the cluster's Kueue, KAI, HAMi, KEDA, Kyverno and Karpenter configuration (read-only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable findings")
        parser.add_argument("--kubeconfig", default=None, help="default: GPUFLEET_KUBECONFIG or in-cluster")
        parser.add_argument("--context", default=None)

    def handle(self, *args: object, **opts: object) -> None:
        # The command line takes precedence over the settings.
        access = kube_access(str(opts["kubeconfig"] or ""), str(opts["context"] or ""))
        try:
            read = KubernetesBackend.from_access(access).read
            loaded = load_catalog()
            clusters = list(Cluster.objects.all())
            local = _local_cluster(clusters)
            specs = {spec.name: spec for spec in loaded["clusters"]}
            # The global checks read the cluster of --kubeconfig: judge it by its own catalog (its pools), not
            # by every cluster's.
            cat = specs[local.name].catalog if local is not None and local.name in specs else loaded["scheduling"]
            store = conf.VCLUSTER_CA_STORE
            more = [*blocker_checks(
                read, platform=lambda: render_platform(RenderContext.from_settings()),
                targets=lambda: [SyncTarget.of(c) for c in clusters],
                store=store,
                openbao=bool(conf.OPENBAO_ADDR),
                bundle=conf.VCLUSTER_CA_BUNDLE),
                *cluster_checks(lambda: [Target(specs[c.name], read if c is local else _reader(c), c is local)
                                         for c in clusters if c.name in specs], external_secrets=bool(store),
                               rule_kind=str(FleetSettings.current().rule_kind))]
            findings = diagnose(read, cat, more,
                                chart_version=conf.VCLUSTER_CHART_VERSION,
                syncer_image=conf.VCLUSTER_SYNCER_IMAGE or "")
        except InfraError as exc:
            raise CommandError(f"cannot read the cluster: {exc}") from exc
        failed = [f for f in findings if not f.ok]
        if opts["json"]:
            self.stdout.write(json.dumps([f.as_dict() for f in findings], indent=2))
        else:
            for f in findings:
                self.stdout.write(f"{'ok  ' if f.ok else 'FAIL'} {f.check}: {f.detail}")
                if not f.ok:
                    self.stdout.write(f"     fix: {f.fix}")
            self.stdout.write(f"{len(findings) - len(failed)} ok, {len(failed)} failed")
        if failed:
            raise CommandError(f"{len(failed)} check(s) failed")


def _local_cluster(clusters: list[Cluster]) -> Cluster | None:
    """The cluster --kubeconfig reads: the one registered without API URL and kubeconfig (the cluster gpufleet
    runs in, issue 26 B7), else `default`."""
    local = [c for c in clusters if not c.kube_api and not c.kubeconfig_secret]
    return local[0] if len(local) == 1 else next((c for c in clusters if c.name == DEFAULT_CLUSTER), None)


def _reader(cluster: Cluster) -> Read | None:
    """A read-only GET on another registered cluster, through the kubeconfig its `kubeconfig_secret` names (as the
    kube backend reaches it); None when nothing says how to reach it."""
    if not cluster.kubeconfig_secret:
        return None
    backend = from_references([(cluster.name, cluster.tree, cluster.kube_api, cluster.kubeconfig_secret)],
                              kube_access(), local_tree=cluster.tree)
    return backend.read
