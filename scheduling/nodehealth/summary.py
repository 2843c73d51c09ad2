"""Nodes by health state, for the admin fleet page: `health_summary()` (a context dict) and the template
include `nodehealth/_summary.html` ({% include "nodehealth/_summary.html" with health=health %}).

The assessment reads the cluster and the TSDB, so it is cached for a minute; an unreachable cluster or
TSDB gives `{"error": ...}` instead of failing the page."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from billing import metrics_source
from infra.errors import PermanentError, TransientError

from . import kube
from .models import SEVERITY, Remediation, RemediationPolicy
from .remediation import assess

CACHE_KEY = "nodehealth:summary"
CACHE_SECONDS = 60


def health_summary(*, fresh: bool = False) -> dict[str, Any]:
    if not fresh and (cached := cache.get(CACHE_KEY)) is not None:
        return cached
    policy = RemediationPolicy.current()
    summary: dict[str, Any] = {"states": {state: 0 for state in SEVERITY}, "nodes": [], "error": "",
                               "dry_run": policy.dry_run,
                               "open_remediations": Remediation.objects.filter(finished__isnull=True).count()}
    if outage := metrics_source.outage(kube.metrics_client_url(), cluster=kube.CLUSTER):
        summary["outage"] = outage
        return summary
    try:
        assessment = assess(None, ops=kube.cluster_ops(), metrics=kube.metrics_client())
    except (TransientError, PermanentError) as exc:  # the text of which names hosts: a short reason instead
        summary["error"] = f"the cluster or the metrics source is {metrics_source.plain_reason(exc)}"
        return summary
    summary["states"] = assessment.summary()
    summary["nodes"] = [row for row in assessment.report() if row["state"] != "healthy"]
    summary["total"] = len(assessment.decisions)
    cache.set(CACHE_KEY, summary, CACHE_SECONDS)
    return summary
