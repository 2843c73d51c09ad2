"""Issue 16 §6: `/metrics` of the platform itself, from real requests, reconciles, a fleet sync, Redis."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from billing.models import UsageCollection
from gpufleet import clock
from gpufleet.audit.context import acting
from gpufleet.observability.logs import JsonFormatter
from scheduling.clusters.sync import sync_fleet
from tenants import actions, reconcile
from tests.support import factories
from tests.support.services import need_binary, need_reference

pytestmark = pytest.mark.django_db(transaction=True)


def scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_requests_are_counted_by_route_method_and_status(client) -> None:
    before = value(scrape(client), "gpufleet_http_request_duration_seconds_count",
                   route="/api/v1/tenants/", method="GET", status="401") or 0
    for _ in range(3):
        assert client.get("/api/v1/tenants/").status_code == 401
    samples = scrape(client)
    count = value(samples, "gpufleet_http_request_duration_seconds_count",
                  route="/api/v1/tenants/", method="GET", status="401")
    assert count == before + 3
    assert not any("tenants/acme" in dict(labels).get("route", "") for _, labels in samples)  # patterns, not paths


def test_reconciles_fleet_sync_push_age_billing_lag_and_queue_depth(client, settings, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    assert reconcile.reconcile_tenant(tenant.pk).phase == "ready"
    (gitops_repo / "clusters/default/tenants" / "acme" / "namespace.core_tenant-acme.yaml").unlink()
    run = sync_fleet()
    assert run.drift_count == 1
    now = clock.now()
    UsageCollection.objects.create(window_start=now - timedelta(hours=2), window_end=now - timedelta(minutes=30),
                                   collected_at=now)
    queue = f"metrics-test-{uuid.uuid4().hex[:8]}"
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    import redis

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.rpush(queue, b"a", b"b", b"c")
    try:
        samples = scrape(client)
    finally:
        broker.delete(queue)

    assert (value(samples, "gpufleet_reconcile_duration_seconds_count", outcome="ready") or 0) >= 1
    assert value(samples, "gpufleet_fleet_sync_drift_objects") == 1
    assert value(samples, "gpufleet_fleet_sync_duration_seconds") == pytest.approx(run.duration_seconds)
    assert value(samples, "gpufleet_gitops_repository_ok", reason="Committed") == 1
    assert 1700 <= (value(samples, "gpufleet_billing_collection_lag_seconds") or 0) <= 2400
    assert value(samples, "gpufleet_celery_queue_depth", queue=queue) == 3


def test_a_failed_reconcile_is_counted_by_reason(client, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    reconcile.reconcile_platform()
    tenant = factories.tenant("acme", "standard")
    actions.approve(tenant)
    (gitops_repo / ".git" / "index.lock").write_text("")
    before = value(scrape(client), "gpufleet_reconcile_failures_total", reason="RepositoryBusy") or 0
    with pytest.raises(Exception):
        reconcile.reconcile_tenant(tenant.pk)
    after = value(scrape(client), "gpufleet_reconcile_failures_total", reason="RepositoryBusy")
    assert after == before + 1


def test_json_log_lines_carry_the_request_id() -> None:
    record = logging.LogRecord("gpufleet.test", logging.WARNING, __file__, 1, "repo %s busy", ("x",), None)
    with acting(request_id="req-42", user_id=7, token_id=None, task=""):
        line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "req-42" and line["user_id"] == 7
    assert line["message"] == "repo x busy" and line["level"] == "WARNING" and line["time"].endswith("+00:00")


def test_the_request_id_reaches_the_log_of_a_real_request(client, caplog, settings) -> None:
    """The id a caller sends (or the middleware makes) is the one the JSON log line of that request carries."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    lines: list[str] = []
    handler.emit = lambda record: lines.append(handler.format(record))  # type: ignore[method-assign]
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    try:
        response = client.get("/api/v1/no-such-route/", HTTP_X_REQUEST_ID="trace-abc")
    finally:
        logger.removeHandler(handler)
    assert response.status_code == 404 and response["X-Request-Id"] == "trace-abc"
    assert any(json.loads(line).get("request_id") == "trace-abc" for line in lines), lines


def test_the_worker_health_output_shows_the_last_push(settings, tmp_path: Path) -> None:
    from gpufleet.liveness import push_summary

    assert push_summary() == "gitops push: disabled"
    settings.GPUFLEET_GITOPS_PUSH, settings.GPUFLEET_GITOPS_REMOTE = True, str(tmp_path / "remote.git")
    settings.GPUFLEET_GITOPS_PUSH_STATUS_DIR = str(tmp_path / "push")
    assert push_summary() == "gitops push: last round never, last successful push never"
    (tmp_path / "push").mkdir()
    pushed = int(clock.now().timestamp()) - 120
    (tmp_path / "push" / "last-push").write_text(f"{pushed} {'c' * 40}\n")
    (tmp_path / "push" / "push-status").write_text(f"state=rejected\nat={pushed + 60}\nmessage=hook\n")
    summary = push_summary()
    assert summary.startswith("gitops push: last round rejected, last successful push 1")
    assert 115 <= int(summary.rsplit(" ", 2)[-2].rstrip("s")) <= 200
