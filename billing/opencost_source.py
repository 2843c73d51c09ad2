"""OpenCost's view of each tenant namespace for a window, through infra.opencost.

Only namespaces: OpenCost cannot tell our flavors apart (it has no MIG and no HAMi notion), so its
figures are per tenant namespace and window, on the invoice and in the reconciliation.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from decimal import Decimal

from gpufleet.core import conf
from infra.errors import PermanentError, TransientError

from .actions import OpenCostFigures
from .periods import period_bounds
from .reconciliation import OpenCostView


def namespace_views(start: datetime, end: datetime) -> dict[str, OpenCostView] | None:
    """{namespace: OpenCostView} for [start, end); None when no OpenCost is configured."""
    url = conf.OPENCOST_URL
    if not url:
        return None
    from infra import opencost

    client = opencost.OpenCostClient(url)
    allocations = client.allocation(start, end, aggregate="namespace", accumulate=True)
    return {name: OpenCostView(_dec(a.gpu_hours), _dec(a.gpu_cost), _dec(a.total_cost))
            for name, a in allocations.items()}


log = logging.getLogger(__name__)


def invoice_figures(period: date) -> dict[str, OpenCostFigures]:
    """{tenant slug: OpenCost cost and GPU-hours} for a month, for the invoice header. They are
    informational: when OpenCost is unreachable the invoices are drafted without them (logged)."""
    start, end = period_bounds(period)
    try:
        views = namespace_views(start, end)
    except (TransientError, PermanentError) as exc:
        log.warning("drafting %s without OpenCost figures: %s", period.strftime("%Y-%m"), exc)
        return {}
    return {ns.removeprefix("tenant-"): OpenCostFigures(view.total_cost if view.total_cost is not None
                                                        else view.gpu_cost, view.gpu_hours)
            for ns, view in (views or {}).items() if ns.startswith("tenant-")}


def _dec(value: object) -> Decimal | None:
    if value is None:
        return None
    number = Decimal(str(value))
    return number if number.is_finite() else None
