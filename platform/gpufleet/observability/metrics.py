"""Prometheus metrics of gpufleet itself, served at `/metrics` (prometheus-client text format).

Two sources:
- in-process instruments: HTTP requests by route (middleware below), reconciles by outcome
  (`observe_reconcile`) and Celery task durations (signals in `gpufleet.observability.celery`). With
  several gunicorn or Celery processes per pod set PROMETHEUS_MULTIPROC_DIR (the chart does): each
  process writes its samples there and the scrape merges them.
- fleet state read at scrape time (`FleetCollector`), the same in every pod: drift count and duration of
  the latest fleet sync pass, the GitOps repository's condition and last-push age, billing collection lag,
  and Celery queue depth (LLEN of the queue in Redis).

Labels are bounded: routes are URL patterns (`api/v1/tenants/<slug:slug>/`), never raw paths.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from gpufleet.core import conf

log = logging.getLogger(__name__)

REQUEST_SECONDS = Histogram(
    "gpufleet_http_request_duration_seconds", "Web request latency by route, method and status",
    ["route", "method", "status"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECONCILE_SECONDS = Histogram(
    "gpufleet_reconcile_duration_seconds", "Duration of one tenant reconcile by outcome (phase or error reason)",
    ["outcome"], buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
RECONCILE_FAILURES = Counter(
    "gpufleet_reconcile_failures_total", "Tenant reconciles that did not end Ready, by reason", ["reason"],
)
TASK_SECONDS = Histogram(
    "gpufleet_celery_task_duration_seconds", "Celery task run time by task name and state",
    ["task", "state"], buckets=(0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800),
)


def observe_reconcile(outcome: str, seconds: float, reason: str = "") -> None:
    RECONCILE_SECONDS.labels(outcome=outcome).observe(seconds)
    if reason:
        RECONCILE_FAILURES.labels(reason=reason).inc()


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    if not match.route:
        return match.view_name or "unnamed"
    # DRF's router uses regex patterns ('^api/v1/tenants/$'): the anchors are noise in a label.
    return "/" + match.route.replace("^", "").replace("$", "")


class MetricsMiddleware:
    """Times every request; labels it with the URL pattern it resolved to (bounded cardinality)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        REQUEST_SECONDS.labels(route=_route(request), method=request.method or "", status=str(response.status_code)) \
            .observe(time.perf_counter() - started)
        return response


class FleetCollector(Collector):
    """Fleet state from the database and the broker, read at each scrape (cheap: a few indexed queries)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from gpufleet import clock

        now = clock.now()
        yield from self._sync(now)
        yield from self._billing(now)
        yield from self._queue()

    def _sync(self, now: Any) -> Iterator[GaugeMetricFamily]:
        from scheduling.models import SyncRun

        run = SyncRun.objects.exclude(finished=None).order_by("-started", "-id").first()
        drift = GaugeMetricFamily("gpufleet_fleet_sync_drift_objects", "Objects repaired by the latest fleet sync")
        duration = GaugeMetricFamily("gpufleet_fleet_sync_duration_seconds", "Duration of the latest fleet sync pass")
        errors = GaugeMetricFamily("gpufleet_fleet_sync_errors", "Errors recorded by the latest fleet sync pass")
        age = GaugeMetricFamily("gpufleet_fleet_sync_age_seconds", "Seconds since the latest fleet sync finished")
        repo_ok = GaugeMetricFamily("gpufleet_gitops_repository_ok",
                                    "1 if the GitOps repository is writable and fully committed", labels=["reason"])
        push_age = GaugeMetricFamily("gpufleet_gitops_last_push_age_seconds",
                                     "Seconds since the last successful push to the GitOps remote")
        if run is not None:
            drift.add_metric([], run.drift_count)
            duration.add_metric([], run.duration_seconds or 0.0)
            errors.add_metric([], len(run.errors))
            age.add_metric([], max(0.0, (now - run.finished).total_seconds()))
            repository = run.repository or {}
            if repository:
                ok = 1.0 if repository.get("status") == "True" else 0.0
                repo_ok.add_metric([str(repository.get("reason", ""))], ok)
            if run.last_push_at is not None:
                push_age.add_metric([], max(0.0, (now - run.last_push_at).total_seconds()))
        yield from (drift, duration, errors, age, repo_ok, push_age)

    def _billing(self, now: Any) -> Iterator[GaugeMetricFamily]:
        from billing.models import UsageCollection

        latest = UsageCollection.objects.order_by("-window_end").values_list("window_end", flat=True).first()
        lag = GaugeMetricFamily("gpufleet_billing_collection_lag_seconds",
                                "Seconds between now and the end of the latest collected usage window")
        if latest is not None:
            lag.add_metric([], max(0.0, (now - latest).total_seconds()))
        yield lag

    def _queue(self) -> Iterator[GaugeMetricFamily]:
        from django.conf import settings

        depth = GaugeMetricFamily("gpufleet_celery_queue_depth", "Messages waiting in the Celery queue",
                                  labels=["queue"])
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        try:
            import redis

            client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2, socket_connect_timeout=2)
            depth.add_metric([queue], float(client.llen(queue)))
        except Exception as exc:  # the broker down must not break the scrape: the series is absent
            log.warning("metrics: cannot read the queue depth of %s: %s", queue, exc)
        yield depth


_FLEET = FleetCollector()


def registry() -> CollectorRegistry:
    """What one scrape reports: this process (or all processes of the pod) plus the fleet state."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)
        merged.register(_FLEET)
        return merged
    local = CollectorRegistry()
    for collector in (REGISTRY, _FLEET):
        local.register(collector)  # type: ignore[arg-type]
    return local


def metrics_view(request: HttpRequest) -> HttpResponse:
    """`GET /metrics`. Unauthenticated like every exporter, so only for direct scrapes: a request that came
    through a proxy (the ingress sets X-Forwarded-For) gets 404 unless GPUFLEET_METRICS_PUBLIC is set.
    The chart's ServiceMonitor scrapes the Service directly."""
    from django.http import Http404

    if request.headers.get("X-Forwarded-For") and not conf.METRICS_PUBLIC:
        raise Http404("metrics are served to direct scrapes only")
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
