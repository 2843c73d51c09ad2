"""gpufleet gpu-model create NAME --dcgm-name "NVIDIA H100 80GB HBM3" --memory-mib 81559 | list"""

from __future__ import annotations

from django.core.management.base import CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions
from scheduling.models import GpuModel

from ._cli import run


class Command(GpufleetCommand):
    help = "Manage GPU models (the physical GPUs flavors are cut from)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="a physical GPU model (as dcgm-exporter names it)")
        create.add_argument("name")
        create.add_argument("--dcgm-name", required=True, help="modelName as dcgm-exporter reports it")
        create.add_argument("--memory-mib", required=True)
        create.add_argument("--node-label", default="", help="value of nvidia.com/gpu.product on its nodes")
        sub.add_parser("list", help="all GPU models")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb == "list":
            run(self, "gpu-model list", lambda: list(GpuModel.objects.values("name", "dcgm_model_name", "memory_mib",
                                                                               "node_label_value")))
            return
        run(self, "gpu-model create", lambda: _json(actions.create_gpu_model(
            o["name"], o["dcgm_name"], o["memory_mib"], o["node_label"])))


def _json(model: GpuModel) -> dict:
    return {"name": model.name, "dcgm_model_name": model.dcgm_model_name, "memory_mib": model.memory_mib,
            "node_label_value": model.node_label_value}
