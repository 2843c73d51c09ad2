"""gpufleet nodepool create NAME --flavor F --gpu-limit N [--instance-type T ...] | list"""

from __future__ import annotations

from django.core.management.base import CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions
from scheduling.models import GpuNodePool

from ._cli import run


class Command(GpufleetCommand):
    help = "Karpenter GPU node pools (WhenEmpty consolidation after 1h unless explicitly overridden)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="a Karpenter node pool for a flavor")
        create.add_argument("name")
        create.add_argument("--flavor", required=True)
        create.add_argument("--gpu-limit", required=True)
        create.add_argument("--instance-type", action="append", default=None)
        create.add_argument("--capacity-type", action="append", default=None)
        create.add_argument("--node-class", default="gpu")
        create.add_argument("--cluster", default=None, help="host cluster whose Karpenter runs it (default: default)")
        create.add_argument("--gpus-per-node", default=8, help="GPUs per node of the instance types (default 8)")
        create.add_argument("--consolidation-policy", default=None)
        create.add_argument("--consolidate-after", default="1h")
        create.add_argument("--allow-underutilized", action="store_true",
                            help="explicit override needed for WhenEmptyOrUnderutilized (evicts live inference)")
        sub.add_parser("list", help="all node pools")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb == "list":
            pools = GpuNodePool.objects.select_related("flavor", "cluster")
            run(self, "nodepool list", lambda: [pool_json(p) for p in pools])
            return

        def create() -> dict:
            pool = actions.create_node_pool(
                o["name"], flavor=o["flavor"], gpu_limit=o["gpu_limit"], instance_types=o["instance_type"],
                capacity_types=o["capacity_type"], node_class=str(o["node_class"]),
                consolidation_policy=o["consolidation_policy"], consolidate_after=o["consolidate_after"],
                allow_underutilized=bool(o["allow_underutilized"]), gpus_per_node=o["gpus_per_node"],
                cluster=o["cluster"])
            for warning in pool.warnings:
                self.stderr.write(f"WARNING: {warning}")
            return pool_json(pool)

        run(self, "nodepool create", create)


def pool_json(pool: GpuNodePool) -> dict:
    return {"name": pool.name, "flavor": pool.flavor.name, "cluster": pool.cluster.name, "gpu_limit": pool.gpu_limit,
            "consolidation_policy": pool.consolidation_policy, "consolidate_after": pool.consolidate_after,
            "warnings": pool.warnings}
