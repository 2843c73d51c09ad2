"""gpufleet flavor create NAME --gpu-model MODEL --mode {whole,mig,hami} [...] | capacity NAME | list"""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions
from scheduling.catalog import rules as catalog
from scheduling.models import Flavor

from ._cli import parse_pairs, run


class Command(GpufleetCommand):
    help = "Manage GPU flavors (whole GPUs, MIG instances, HAMi shares)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="the GPU model must exist (gpufleet gpu-model create)")
        create.add_argument("name")
        create.add_argument("--gpu-model", required=True)
        create.add_argument("--mode", required=True, choices=catalog.MODES)
        create.add_argument("--mig-profile", default="")
        create.add_argument("--memory-percent", default=None)
        create.add_argument("--cores-percent", default=None)
        create.add_argument("--capacity", default=0, help="units the fleet offers (entered inventory)")
        create.add_argument("--weight", default=None, help="GPU-equivalents per unit (default: catalog rule)")
        create.add_argument("--overcommit-factor", default=None)
        create.add_argument("--node-label", action="append", metavar="KEY=VALUE")
        create.add_argument("--taint", action="append", metavar="KEY=VALUE:EFFECT",
                            help="a taint of this flavor's nodes; pods of the flavor get a matching toleration")
        capacity = sub.add_parser("capacity", help="change entered capacity or the overcommit factor")
        capacity.add_argument("name")
        capacity.add_argument("--capacity", default=None)
        capacity.add_argument("--overcommit-factor", default=None)
        sub.add_parser("list", help="all flavors with capacity and weight")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb == "list":
            run(self, "flavor list", lambda: [flavor_json(f) for f in Flavor.objects.select_related("gpu_model")])
        elif verb == "create":
            labels = parse_pairs(o["node_label"], "--node-label")  # type: ignore[arg-type]
            taints = [parse_taint(t) for t in o["taint"] or []]  # type: ignore[union-attr]
            run(self, "flavor create", lambda: flavor_json(actions.create_flavor(
                o["name"], gpu_model=o["gpu_model"], mode=o["mode"], mig_profile=o["mig_profile"],
                memory_percent=o["memory_percent"], cores_percent=o["cores_percent"], capacity=o["capacity"],
                weight=o["weight"], overcommit_factor=o["overcommit_factor"], node_labels=labels, taints=taints,
                tolerations=[{"key": t["key"], "operator": "Equal", "value": t.get("value", ""),
                              "effect": t["effect"]} for t in taints])))
        else:
            flavor = Flavor.objects.filter(name=o["name"]).first()
            if flavor is None:
                raise CommandError(f"no flavor named {o['name']!r}")
            run(self, "flavor capacity", lambda: flavor_json(actions.set_flavor_capacity(
                flavor, capacity=o["capacity"], overcommit_factor=o["overcommit_factor"])))


def flavor_json(flavor: Flavor) -> dict:
    return {**actions.flavor_snapshot(flavor), "resource_name": flavor.resource_name,
            "effective_capacity": actions.effective_capacity(flavor)}


def parse_taint(text: str) -> dict:
    spec, sep, effect = text.rpartition(":")
    key, _, value = spec.partition("=")
    if not sep or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise CommandError(f"--taint: expected KEY=VALUE:NoSchedule|PreferNoSchedule|NoExecute, got {text!r}")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
