"""The provider's HTTP client and diagnostics, against a small real HTTP server on 127.0.0.1 (no Django)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpufleet.terraform.client import ApiError, Client
from gpufleet.terraform.common import Object, report
from gpufleet.terraform.provider import GpufleetProvider


class Scripted:
    """Answers each request with the next scripted (status, body, headers); records what it was sent."""

    def __init__(self, answers: list[tuple[int, dict[str, Any], dict[str, str]]]) -> None:
        self.answers = list(answers)
        self.seen: list[dict[str, Any]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                scripted.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                      "body": self.rfile.read(length)})
                status, body, headers = scripted.answers.pop(0)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted():
    servers: list[Scripted] = []

    def start(*answers: tuple[int, dict[str, Any], dict[str, str]]) -> Scripted:
        servers.append(Scripted(list(answers)))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_retries_409_429_503_with_one_idempotency_key_and_honours_retry_after(scripted):
    server = scripted((503, {"detail": "busy"}, {}), (429, {"detail": "slow down"}, {"Retry-After": "3"}),
                      (409, {"detail": "in flight"}, {}), (201, {"id": 7}, {}))
    pauses: list[float] = []
    client = Client(server.url, "gpf_x", sleep=pauses.append)
    assert client.post("tenants/", {"slug": "vision"}) == {"id": 7}
    keys = {seen["headers"]["Idempotency-Key"] for seen in server.seen}
    assert len(server.seen) == 4 and len(keys) == 1 and keys != {""}
    assert pauses == [0.5, 3.0, 2.0]  # backoff 0.5, then Retry-After, then backoff 2.0
    assert server.seen[0]["headers"]["Authorization"] == "Bearer gpf_x" and server.seen[0]["path"] == "/api/v1/tenants/"


def test_gives_up_after_the_retry_budget_with_the_last_problem(scripted):
    server = scripted(*[(503, {"detail": "down for maintenance"}, {})] * 5)
    client = Client(server.url, "gpf_x", sleep=lambda s: None, retry_budget=1.0)
    with pytest.raises(ApiError) as caught:
        client.get("tenants/")
    assert caught.value.status == 503 and caught.value.detail == "down for maintenance"
    assert len(server.seen) < 5


def test_a_400_is_not_retried_and_keeps_the_field_map(scripted):
    problem = {"type": "urn:gpufleet:problem:invalid", "title": "Bad Request", "status": 400,
               "detail": "nominal: must not be negative", "fields": {"nominal": ["must not be negative"]},
               "error": "invalid", "errors": [{"field": "nominal", "reason": "must not be negative"}]}
    server = scripted((400, problem, {}))
    with pytest.raises(ApiError) as caught:
        Client(server.url, "gpf_x", sleep=lambda s: None).post("quotas/", {"nominal": -1})
    assert len(server.seen) == 1
    assert caught.value.fields == {"nominal": ["must not be negative"]} and caught.value.status == 400


def test_old_error_lists_still_map_to_fields():
    class Response:
        status_code, reason = 400, "Bad Request"

        @staticmethod
        def json() -> dict[str, Any]:
            return {"error": "invalid", "detail": "slug: taken", "errors": [{"field": "slug", "reason": "taken"}]}

    assert ApiError.from_response(Response()).fields == {"slug": ["taken"]}  # type: ignore[arg-type]


class Diags:
    def __init__(self) -> None:
        self.errors: list[tuple[str, list[str] | None]] = []

    def add_error(self, summary: str, detail: str = "", path: list[str] | None = None) -> None:
        self.errors.append((summary, path))


def test_each_field_reason_lands_on_its_attribute():
    diags = Diags()
    exc = ApiError(400, "x", {"nominal": ["must not be negative"], "triggers[0]": ["unknown metric"]})
    report(diags, "setting the quota", exc, {"nominal", "tenant"})
    assert diags.errors == [("setting the quota: nominal must not be negative", ["nominal"]),
                            ("setting the quota: triggers[0] unknown metric", None)]


def test_object_type_is_a_cty_object():
    item = Object({"name": __import__("tf.types", fromlist=["String"]).String()})
    assert json.loads(item.tf_type()) == ["object", {"name": "string"}]


def test_configuration_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPUFLEET_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUFLEET_TOKEN", "gpf_env")
    provider = GpufleetProvider()
    diags = Diags()
    provider.configure_provider(diags, {"endpoint": None, "token": None, "timeout": 5, "retry_timeout": None,
                                        "ca_bundle": None})
    assert diags.errors == [] and provider.client is not None
    assert (provider.client.endpoint, provider.client.token, provider.client.timeout) == \
        ("http://127.0.0.1:9", "gpf_env", 5.0)
    monkeypatch.delenv("GPUFLEET_TOKEN")
    missing = Diags()
    GpufleetProvider().configure_provider(missing, {})
    assert missing.errors == [("token is not set", ["token"])]


def test_a_replay_whose_secret_was_withheld_is_not_retried(scripted):
    # The server never stores a token's secret (issue 27 item 2): retrying the same key cannot bring it back.
    problem = {"status": 409, "detail": "its secret was shown once", "error": "idempotency_secret_withheld"}
    server = scripted((409, problem, {}), (409, problem, {}))
    with pytest.raises(ApiError) as caught:
        Client(server.url, "gpf_x", sleep=lambda s: None).post("tokens/", {"name": "ci"})
    assert len(server.seen) == 1 and caught.value.code == "idempotency_secret_withheld"
