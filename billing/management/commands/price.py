"""gpufleet price set|derive|list"""

from __future__ import annotations

from django.core.management.base import CommandParser

from billing import actions
from billing.models import Price
from billing.periods import check_currency
from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from gpufleet.core import conf
from gpufleet.core.errors import ActionError

from ._billing_cli import action_error, dumps


class Command(GpufleetCommand):
    help = "Manage the price book (per flavor, per currency, with effective dates)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        set_ = sub.add_parser("set", help="enter a price per unit-hour from a date on")
        set_.add_argument("--flavor", required=True)
        set_.add_argument("--per-unit-hour", required=True)
        set_.add_argument("--currency", required=True)
        set_.add_argument("--from", dest="effective_from", default=None, help="YYYY-MM-DD (default: today)")
        set_.add_argument("--cluster", default=None, help="only on this cluster (default: every cluster)")
        set_.add_argument("--yes", action="store_true",
                          help="enter a price in a currency other than the fleet's without asking")
        derive = sub.add_parser("derive", help="OpenCost GPU hourly cost x flavor weight x markup")
        derive.add_argument("--flavor", required=True)
        derive.add_argument("--gpu-hourly", required=True, help="OpenCost's hourly cost of one GPU of the model")
        derive.add_argument("--markup", default="1", help="multiplier, e.g. 1.25")
        derive.add_argument("--currency", required=True)
        derive.add_argument("--from", dest="effective_from", default=None)
        derive.add_argument("--cluster", default=None, help="only on this cluster (default: every cluster)")
        sub.add_parser("list", help="the price book")

    def handle(self, *args: object, verb: str, **opts: object) -> None:
        with acting(task=f"cli:price {verb}"):
            try:
                if verb == "list":
                    self.stdout.write(dumps([p.snapshot() for p in Price.objects.select_related("flavor", "cluster")]))
                    return
                if verb == "set":
                    self._check_currency(str(opts["currency"]), yes=bool(opts["yes"]))
                    price = actions.set_price(opts["flavor"], opts["per_unit_hour"], opts["currency"],
                                              opts["effective_from"], cluster=opts["cluster"])
                else:
                    price = actions.derive_price(opts["flavor"], opts["currency"], opts["gpu_hourly"],
                                                 opts["markup"], opts["effective_from"], cluster=opts["cluster"])
            except ActionError as exc:
                raise action_error(exc) from exc
            self.stdout.write(dumps(price.snapshot()))

    def _check_currency(self, currency: str, *, yes: bool) -> None:
        """Invoices are in the fleet's billing currency and read only its prices: a price in another one is
        never billed, so entering it by mistake is asked about (or refused without --yes)."""
        fleet = conf.BILLING_CURRENCY
        if check_currency(currency) is None and currency != fleet:  # an invalid code is the action's 400
            self.confirm(f"--currency: {currency} is not the fleet's billing currency ({fleet}); invoices read "
                         f"{fleet} prices only, so this price will not be billed. Enter it anyway?", yes=yes)
