"""gpufleet cluster add NAME [...] | list | show NAME | offer NAME --flavor F --capacity N |
drain-placements NAME [--to OTHER] [--approve]"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.management.base import CommandError, CommandParser

from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from gpufleet.core.errors import ActionError
from scheduling import actions
from scheduling.clusters import actions as cluster_actions
from scheduling.clusters.models import Cluster, ClusterFlavor, Placement, PlacementChangeRequest
from tenants.management.commands._util import action_error, dumps


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], empty: str) -> str:
    if not rows:
        return empty
    cells = [list(header), *[["-" if c is None or c == "" else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def reachable(cluster: Cluster) -> str:
    return {None: "unknown", True: "yes", False: "no"}[cluster.reachable]


def cluster_json(cluster: Cluster) -> dict[str, Any]:
    offers = ClusterFlavor.objects.filter(cluster=cluster).select_related("flavor")
    placements = Placement.objects.filter(cluster=cluster).select_related("tenant")
    return {
        **cluster.spec(), "tree": cluster.tree,
        "status": {"reachable": cluster.reachable, "last_sync_at": cluster.last_sync_at, "drift": cluster.drift,
                   "message": cluster.status_message},
        "flavors": [{"flavor": o.flavor.name, "capacity": o.capacity} for o in offers],
        "placements": [{"tenant": p.tenant.slug, "home": p.home, "conditions": p.conditions} for p in placements],
    }


def _json_flag(parser: CommandParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


class Command(GpufleetCommand):
    help = "Host clusters: register, list, inspect, offer flavors, drain placements (reviewed changes)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        add = sub.add_parser("add", help="register a host cluster (platform admin)")
        add.add_argument("name", help="Kubernetes DNS label, e.g. training")
        add.add_argument("--purpose", default="general", help="training | inference | dev | general")
        add.add_argument("--region", default="", help="region id, e.g. eu-west-1")
        add.add_argument("--region-name", default="", help="human name of the region")
        add.add_argument("--zone", action="append", default=None, help="an availability zone (repeat)")
        add.add_argument("--trust-level", action="append", default=None,
                         help="a tenant trust level it may host (repeat; none = every level)")
        add.add_argument("--gitops-path", default="", help="its tree in the GitOps repository (clusters/<name>)")
        add.add_argument("--kube-api", default="", help="API server URL (Kubernetes backend)")
        add.add_argument("--kubeconfig-secret", default="",
                         help="NAME of the Secret or file holding its kubeconfig (never the kubeconfig itself)")
        add.add_argument("--metrics-url", default="", help="its own metrics source (default: the platform's)")
        add.add_argument("--metrics-label", default="", help="value of the `cluster` label on its series")
        _json_flag(add)
        _json_flag(sub.add_parser("list", help="all clusters as a table (--json for scripts)"))
        show = sub.add_parser("show", help="one cluster: status, flavors and capacity, placements")
        show.add_argument("name")
        _json_flag(show)
        offer = sub.add_parser("offer", help="offer a flavor on a cluster with its capacity there (platform admin)")
        offer.add_argument("name")
        offer.add_argument("--flavor", required=True)
        offer.add_argument("--capacity", required=True, help="units of the flavor on this cluster")
        drain = sub.add_parser("drain-placements",
                               help="propose removing (or, with --to, moving) every non-home placement")
        drain.add_argument("name")
        drain.add_argument("--to", default="", help="add each tenant to this cluster before removing it")
        drain.add_argument("--reason", default="", help="recorded on every proposal")
        drain.add_argument("--approve", action="store_true",
                           help="approve each proposal at once (platform admin); default: leave them for review")
        _json_flag(drain)

    def handle(self, *args: object, verb: str, **o: Any) -> None:
        with acting(task=f"cli:cluster {verb}"):
            try:
                getattr(self, "do_" + verb.replace("-", "_"))(**o)
            except ActionError as exc:
                raise action_error(exc) from exc

    def out(self, data: Any, text: str, as_json: bool) -> None:
        self.stdout.write(dumps(data) if as_json else text)

    def do_add(self, *, name: str, json: bool, **o: Any) -> None:
        cluster = cluster_actions.create_cluster(
            name, purpose=o["purpose"], region=o["region"], region_name=o["region_name"], zones=o["zone"] or [],
            trust_levels=o["trust_level"] or [], gitops_path=o["gitops_path"], kube_api=o["kube_api"],
            kubeconfig_secret=o["kubeconfig_secret"], metrics_url=o["metrics_url"], metrics_label=o["metrics_label"])
        self.out(cluster_json(cluster), f"cluster {cluster.name} added ({cluster.purpose}, tree {cluster.tree})",
                 json)

    def do_list(self, *, json: bool, **o: Any) -> None:
        clusters = list(Cluster.objects.all())
        counts: dict[int, int] = {}
        for cluster_id in Placement.objects.values_list("cluster_id", flat=True):
            counts[cluster_id] = counts.get(cluster_id, 0) + 1
        rows = [(c.name, c.purpose, c.region, ",".join(c.trust_levels) or "all", reachable(c),
                 c.last_sync_at.strftime("%Y-%m-%d %H:%M") if c.last_sync_at else "never", c.drift,
                 counts.get(c.pk, 0)) for c in clusters]
        self.out([cluster_json(c) for c in clusters],
                 table(("NAME", "PURPOSE", "REGION", "TRUST", "REACHABLE", "LAST SYNC", "DRIFT", "PLACEMENTS"),
                       rows, "no clusters (add one: gpufleet cluster add <name> --purpose training)"), json)

    def do_show(self, *, name: str, json: bool, **o: Any) -> None:
        cluster = get_cluster(name)
        data = cluster_json(cluster)
        lines = [f"cluster {cluster.name}: {cluster.purpose}, region {cluster.region or '-'}"
                 f"{' (' + cluster.region_name + ')' if cluster.region_name else ''}",
                 f"hosts trust levels: {', '.join(cluster.trust_levels) or 'all'}; tree {cluster.tree}",
                 f"reachable: {reachable(cluster)}; last sync: {cluster.last_sync_at or 'never'}; "
                 f"drift: {cluster.drift}" + (f"; {cluster.status_message}" if cluster.status_message else ""),
                 "", table(("FLAVOR", "CAPACITY"), [(f["flavor"], f["capacity"]) for f in data["flavors"]],
                           "no flavors offered"),
                 "", table(("TENANT", "HOME"), [(p["tenant"], "yes" if p["home"] else "no")
                                                for p in data["placements"]], "no placements")]
        self.out(data, "\n".join(lines), json)

    def do_offer(self, *, name: str, flavor: str, capacity: str, **o: Any) -> None:
        offer = actions.set_cluster_flavor(name, flavor, capacity=capacity)
        self.stdout.write(f"{offer.flavor.name} on {offer.cluster.name}: {offer.capacity} units "
                          f"(fleet total {offer.flavor.capacity})")

    def do_drain_placements(self, *, name: str, to: str, reason: str, approve: bool, json: bool, **o: Any) -> None:
        result = cluster_actions.drain_placements(get_cluster(name), to=to, reason=reason, approve=approve)
        data = {"cluster": result.cluster, "to": result.target, "skipped_homes": result.skipped,
                "quotas_left": result.quotas_left,
                "requests": [request_json(r) for r in result.requests]}
        rows = [(r.pk, r.tenant.slug, r.action, r.cluster.name, r.state) for r in result.requests]
        lines = [table(("REQUEST", "TENANT", "ACTION", "CLUSTER", "STATE"), rows,
                       f"no non-home placements on {result.cluster}")]
        if result.skipped:
            lines.append(f"home here (move with a set-home placement request): {', '.join(result.skipped)}")
        if result.quotas_left:
            lines.append(f"quotas on {result.cluster} that approving the removals deletes: "
                         f"{', '.join(result.quotas_left)}")
        self.out(data, "\n".join(lines), json)


def get_cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise CommandError(f"no cluster named {name!r}")
    return cluster


def request_json(change: PlacementChangeRequest) -> dict[str, Any]:
    return {"id": change.pk, "tenant": change.tenant.slug, **change.spec(), "state": change.state,
            "reason": change.reason}


