"""Which flavor modes a tenant may use. One function, so switching to the isolation app is one line."""

from __future__ import annotations

from typing import Any

from . import catalog

# DESIGN §3 defaults; the isolation app owns the real policy (platform admins may tighten it).
_DEFAULT_MODES = {
    "untrusted": frozenset({catalog.WHOLE}),
    "standard": frozenset({catalog.WHOLE, catalog.MIG}),
    "trusted": frozenset({catalog.WHOLE, catalog.MIG, catalog.HAMI}),
}


def allowed_modes(tenant: Any) -> frozenset[str]:
    try:
        from tenants.isolation.policy import allowed_modes as isolation_allowed_modes
    except ImportError:  # the isolation app is not installed yet: DESIGN's defaults
        return _DEFAULT_MODES.get(tenant.trust_level, frozenset({catalog.WHOLE}))
    return frozenset(isolation_allowed_modes(tenant))


def modes_of_view(view: Any) -> frozenset[str]:
    """Pure: the allowed modes the isolation app already loaded into the tenant's view (so rendering
    does not query them a second time); DESIGN's defaults for the trust level without it."""
    try:
        from tenants.isolation.config import of_view
    except ImportError:
        return _DEFAULT_MODES.get(view.trust_level, frozenset({catalog.WHOLE}))
    return frozenset(of_view(view).allowed_modes)
