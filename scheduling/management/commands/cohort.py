"""gpufleet cohort create NAME [--parent P] [--weight W] | list"""

from __future__ import annotations

from django.core.management.base import CommandParser

from gpufleet.command import GpufleetCommand
from scheduling import actions
from scheduling.models import Cohort

from ._cli import run


class Command(GpufleetCommand):
    help = "Cohorts: tenants that lend and borrow idle quota (optionally nested)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="create a cohort (optionally nested under --parent)")
        create.add_argument("name")
        create.add_argument("--parent", default=None)
        create.add_argument("--weight", default=None, help="fair-sharing weight (default 1)")
        sub.add_parser("list", help="all cohorts")

    def handle(self, *args: object, verb: str, **o: object) -> None:
        if verb == "list":
            run(self, "cohort list", lambda: [cohort_json(c) for c in Cohort.objects.select_related("parent")])
            return
        run(self, "cohort create", lambda: cohort_json(actions.create_cohort(
            o["name"], parent=o["parent"], fair_sharing_weight=o["weight"])))


def cohort_json(cohort: Cohort) -> dict:
    return {"name": cohort.name, "parent": cohort.parent.name if cohort.parent else "",
            "fair_sharing_weight": str(cohort.fair_sharing_weight)}
