"""Issue 27 item 10: hardening found by the production-profile probe.

- `Cache-Control: no-store` on every authenticated answer (a new token's secret, a kubeconfig, pages, API);
- the audit actor of `endpoint.scale_to_zero` and `fleet.idle_notice` is the user and the token;
- an Authorization header whose separator is a no-break space (U+00A0) is refused (401);
- the worker's metrics port binds where the chart says (the pod IP), loopback when unset, never 0.0.0.0;
- no browsable API in the production profile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from rest_framework.test import APIClient

from gpufleet.accounts.models import ApiToken
from gpufleet.audit.models import AuditEvent
from tests.support import factories
from tests.support.services import REPO
from tests.test_settings_profiles import BASE_ENV, production_env

pytestmark = pytest.mark.django_db


def token_client(user: Any) -> tuple[APIClient, ApiToken, str]:
    plaintext, prefix, digest = ApiToken.generate()
    token = ApiToken.objects.create(user=user, name="t", prefix=prefix, digest=digest)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client, token, plaintext


def no_store(response: Any) -> bool:
    return "no-store" in {part.strip() for part in response.get("Cache-Control", "").split(",")}


def test_every_authenticated_answer_is_no_store(client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"  # a kubeconfig names the issuer
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = ""  # the sign-in issuer above is the one meant, and then none
    alice = factories.user("alice")
    tenant = factories.tenant("acme", owner=alice, members={"owner": alice}, phase="ready")
    api, _, _ = token_client(alice)
    created = api.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert created.status_code == 201 and no_store(created), created.headers
    listed = api.get("/api/v1/tenants/")
    assert listed.status_code == 200 and no_store(listed)
    refused = api.get("/api/v1/tenants/does-not-exist/")
    assert refused.status_code == 404 and no_store(refused)
    client.force_login(alice)
    for path in ("/", f"/tenants/{tenant.slug}/", f"/tenants/{tenant.slug}/kubeconfig/"):
        page = client.get(path)
        assert page.status_code == 200 and no_store(page), (path, page.status_code, page.headers)
    settings.OIDC_OP_ISSUER = ""
    unavailable = client.get(f"/tenants/{tenant.slug}/kubeconfig/")  # a page saying why there is none
    assert unavailable.status_code == 409 and no_store(unavailable), unavailable.headers


def test_a_no_break_space_separator_is_refused() -> None:
    alice = factories.user("alice")
    _, _, plaintext = token_client(alice)
    api = APIClient()
    for header in (f"Bearer\u00a0{plaintext}", f"Bearer\u0085{plaintext}", f"Bearer\t{plaintext}",
                   f"\u00a0Bearer {plaintext}"):
        answer = api.get("/api/v1/tenants/", HTTP_AUTHORIZATION=header)
        assert answer.status_code == 401, (repr(header[:8]), answer.status_code)
    assert api.get("/api/v1/tenants/", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 200
    assert api.get("/api/v1/tenants/", HTTP_AUTHORIZATION=f"Bearer  {plaintext} ").status_code == 200


def test_fleet_writes_are_audited_with_the_user_and_the_token() -> None:
    from scheduling import actions as scheduling_actions
    from scheduling.models import SlaTier

    alice, root = factories.user("alice"), factories.user("root", roles={"platform-admin"})
    tenant = factories.tenant("acme", owner=alice, members={"owner": alice}, phase="ready")
    scheduling_actions.defaults.ensure_rows()
    warm = SlaTier.objects.filter(min_replicas__gt=0).first()
    cold = SlaTier.objects.filter(min_replicas=0).first()
    assert warm is not None and cold is not None
    endpoint = scheduling_actions.create_endpoint(tenant, "chat", model="llama-3-8b", tier=warm.name)
    api, token, _ = token_client(alice)
    done = api.post(f"/api/v1/fleet/endpoints/{endpoint.pk}/scale-to-zero/", {"tier": cold.name}, format="json")
    assert done.status_code == 200, done.content
    event = AuditEvent.objects.get(action="endpoint.scale_to_zero")
    assert (event.actor_user_id, event.actor_token_id) == (alice.pk, token.pk)
    admin_api, admin_token, _ = token_client(root)
    finding = {"namespace": "tenant-acme", "pod": "train-1", "flavor": "h100", "start": "2026-11-02T08:00:00Z",
               "idle_seconds": 7200, "memory_mib": "1000", "signal": "profiling"}
    sent = admin_api.post("/api/v1/fleet/notices/", {"tenant": "acme", "finding": finding}, format="json")
    assert sent.status_code == 201, sent.content
    event = AuditEvent.objects.get(action="fleet.idle_notice")
    assert (event.actor_user_id, event.actor_token_id) == (root.pk, admin_token.pk)


def test_the_worker_metrics_port_binds_where_it_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    import prometheus_client

    from gpufleet.observability import celery as worker_metrics

    bound: list[tuple[int, str]] = []
    monkeypatch.setattr(prometheus_client, "start_http_server",
                        lambda port, addr="0.0.0.0", registry=None: bound.append((port, addr)))
    monkeypatch.setenv("GPUFLEET_WORKER_METRICS_PORT", "9808")
    monkeypatch.delenv("GPUFLEET_WORKER_METRICS_ADDR", raising=False)
    worker_metrics._serve_worker_metrics()
    monkeypatch.setenv("GPUFLEET_WORKER_METRICS_ADDR", "10.1.2.3")
    worker_metrics._serve_worker_metrics()
    assert bound == [(9808, "127.0.0.1"), (9808, "10.1.2.3")]


def test_the_chart_binds_the_worker_metrics_to_the_pod_ip() -> None:
    from tests.helm.chart import containers, render

    worker = {c["name"]: c for c in containers(render().get("Deployment", "gpufleet-worker"))}["worker"]
    env = {e["name"]: e for e in worker["env"]}
    assert env["GPUFLEET_WORKER_METRICS_ADDR"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_no_browsable_api_in_production() -> None:
    code = ("import django, json; django.setup(); from django.conf import settings; "
            "from rest_framework.settings import api_settings; "
            "print(json.dumps([c.__name__ for c in api_settings.DEFAULT_RENDERER_CLASSES]))")
    result = subprocess.run([sys.executable, "-c", code], env=production_env(BASE_ENV), capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == ["JSONRenderer"]
