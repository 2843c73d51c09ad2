"""Which flavor modes a tenant may use: the isolation app's policy (tenants.isolation), one place to ask."""

from __future__ import annotations

from typing import Any

from tenants.isolation.config import of_view
from tenants.isolation.policy import allowed_modes as isolation_allowed_modes


def allowed_modes(tenant: Any) -> frozenset[str]:
    """Reads the database (the tenant's isolation row); for request handling and actions."""
    return frozenset(isolation_allowed_modes(tenant))


def modes_of_view(view: Any) -> frozenset[str]:
    """Pure: the allowed modes the isolation app already loaded into the tenant's view (so rendering
    does not query them a second time); the trust level's defaults for a bare view."""
    return frozenset(of_view(view).allowed_modes)
