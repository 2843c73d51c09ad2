"""The main menu: its items, who sees each, and which pages belong to which item (so the page's own item is
the highlighted one). One table instead of conditions in the template: a page added later belongs to an item
by its URL name, and tests/portal/test_navigation_menu.py checks that every page highlights exactly one item.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class Item:
    label: str
    url_name: str
    # "namespace:name" or "namespace:prefix*". A page belongs to the first visible item that lists it, the
    # admins-only items tried first (the CSV numbers are the Fleet page's for admins, a tenant's for others).
    pages: tuple[str, ...]
    admins_only: bool = False


MENU = (
    Item("Overview", "portal:home", ("portal:home",)),
    Item("Tenants", "portal:tenant-list", ("portal:tenant-*", "scheduling:tenant-gpu", "scheduling:quota-set",
                                           "scheduling:tenant-workloads", "fleetops:tenant", "fleetops:numbers")),
    Item("GPU flavors", "scheduling:flavors", ("scheduling:flavors", "scheduling:node-pool-create",
                                               "scheduling:requests", "scheduling:request-*", "scheduling:index")),
    Item("Clusters", "scheduling:clusters", ("scheduling:clusters", "scheduling:cluster-detail", "scheduling:queue")),
    Item("Fleet", "fleetops:fleet", ("fleetops:fleet", "fleetops:numbers"), admins_only=True),
    Item("Node health", "scheduling:node-health", ("scheduling:node-health", "scheduling:node-uncordon"),
         admins_only=True),
    Item("Billing", "billing:invoice-list", ("billing:*",)),
    Item("API tokens", "portal:tokens", ("portal:token*",)),
    Item("Simulate", "scheduling:simulate", ("scheduling:simulat*", "scheduling:plan-autoscaling"),
         admins_only=True),
    Item("Approvals", "portal:approvals", ("portal:approvals",), admins_only=True),
)


def _matches(pattern: str, page: str) -> bool:
    return page.startswith(pattern[:-1]) if pattern.endswith("*") else page == pattern


def current_item(page: str, *, admin: bool = True) -> Item | None:
    """The menu item a page ("namespace:name") belongs to for this viewer; None for pages outside the menu."""
    visible = [item for item in MENU if admin and item.admins_only] + [i for i in MENU if not i.admins_only]
    return next((item for item in visible if any(_matches(p, page) for p in item.pages)), None)


def menu(page: str, *, admin: bool) -> list[dict[str, object]]:
    """The items the viewer sees, each with its URL and whether it is the current page's."""
    here = current_item(page, admin=admin)
    return [{"label": item.label, "url": reverse(item.url_name), "current": item is here}
            for item in MENU if admin or not item.admins_only]
