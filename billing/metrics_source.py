"""Whether a metrics source answers, asked once per page and said plainly when it does not.

Pages that measure in the TSDB (the fleet page, a tenant's utilisation, the queue view, node health) call
`outage()` before their queries. One probe with a short timeout (`MetricsClient.probe`), remembered for
`REMEMBER_SECONDS`, replaces a query's retries times the page's queries: a source that is down costs a page
one second, not five, and the next pages none. What people see is an `Outage`: the source's name (never its
address or the adapter's exception text, which name internal hosts), a short reason and the last good
reading (the newest hour of measured usage stored), plus, for admins, where the setting lives.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db.models import Max

from gpufleet.core import metrics
from infra.errors import PermanentError
from infra.metrics import connection_reason
from scheduling.clusters.models import Cluster

REMEMBER_SECONDS = 30  # a failed or good probe is trusted this long (the portal's pages come in bursts)
PLATFORM_SOURCE = "platform metrics (GPUFLEET_METRICS_URL)"


@dataclass(frozen=True)
class Outage:
    """A metrics source that did not answer, as people are told about it."""

    source: str  # what it is called: PLATFORM_SOURCE or "cluster <name>"
    reason: str  # "connection refused", "host name not resolved", "timed out", "HTTP 503", "not configured"
    last_good: datetime | None  # end of the newest measured usage hour, None when nothing was ever measured
    cluster: str = ""  # the cluster whose own `metrics_url` this is ("" for the platform's setting)

    def __str__(self) -> str:
        when = f"usage measured until {self.last_good:%Y-%m-%d %H:%M} UTC" if self.last_good else "none yet"
        return f"metrics source not reachable: {self.source} ({self.reason}); last good reading: {when}"


def _key(url: str) -> str:
    return "metrics-source:" + hashlib.sha256(url.encode()).hexdigest()[:32]


def probe(url: str) -> str:
    """"" when `url` answers, else a short reason; remembered for REMEMBER_SECONDS (per URL)."""
    if not url:
        return "not configured"
    remembered = cache.get(_key(url))
    if remembered is not None:
        return str(remembered)
    reason = metrics.client_at(url).probe()
    cache.set(_key(url), reason, REMEMBER_SECONDS)
    return reason


def forget() -> None:
    """Drop remembered probes of the configured sources (tests, and after an admin changes a URL)."""
    urls = {metrics.platform_url(), *Cluster.objects.values_list("metrics_url", flat=True)}
    cache.delete_many([_key(u) for u in urls if u])


def last_good_reading() -> datetime | None:
    from .models import UsageRecord

    newest = UsageRecord.objects.aggregate(newest=Max("hour"))["newest"]
    return newest + timedelta(hours=1) if newest else None


def outage(url: str | None = None, *, cluster: str = "") -> Outage | None:
    """The outage of `url` (default: the platform's GPUFLEET_METRICS_URL), or None when it answers."""
    shared = metrics.platform_url()
    url = shared if url is None else (url or shared)
    reason = probe(url)
    if not reason:
        return None
    own = bool(cluster) and url != shared
    return Outage(f"cluster {cluster}" if own else PLATFORM_SOURCE, reason, last_good_reading(),
                  cluster if own else "")


def plain_reason(exc: Exception) -> str:
    """What went wrong talking to a service, in words without addresses (the exception's own text often
    carries urllib3's pool repr: internal host names and ports)."""
    if isinstance(exc, PermanentError):
        return "refused"
    return connection_reason(exc) if exc.__cause__ is not None else "not answering"


def failed(exc: Exception, *, url: str | None = None, cluster: str = "") -> Outage:
    """An outage from a query that failed after the probe passed (the source went away mid-page, or the
    query itself was refused): a short reason, never the exception's text. Remembered like a failed probe,
    except a catalogue that cannot be measured (`MeteringInputError`: its text names fields, not hosts)."""
    from .metering.usage import MeteringInputError

    shared = metrics.platform_url()
    url = shared if url is None else (url or shared)
    if isinstance(exc, MeteringInputError):
        return Outage(PLATFORM_SOURCE, f"cannot measure the flavors: {exc.reason}", last_good_reading())
    if isinstance(exc, PermanentError) and not url:
        reason = "not configured"
    elif isinstance(exc, PermanentError):
        reason = "query refused"
    else:
        reason = connection_reason(exc) if exc.__cause__ is not None else "not answering"
    if url:
        cache.set(_key(url), reason, REMEMBER_SECONDS)
    own = bool(cluster) and url != shared
    return Outage(f"cluster {cluster}" if own else PLATFORM_SOURCE, reason, last_good_reading(),
                  cluster if own else "")
