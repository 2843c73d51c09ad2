"""infra.metrics against the real VictoriaMetrics (parsing, nocache, bad queries) and a scripted
server (5xx, API error types, timeouts); infra.http's timeouts that cannot be forgotten."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
import requests

from infra import http
from infra.errors import PermanentError, TransientError
from infra.metrics import MetricsClient
from tests.metering.scripted_http import Reply, serve
from tests.support.services import free_port

pytestmark = pytest.mark.service


def test_instant_and_range_results_are_exact(victoria, metrics, year):
    base = int(datetime(year, 6, 1, tzinfo=UTC).timestamp())
    victoria.import_prometheus([
        f'exact_probe{{k="a"}} 0.1 {base * 1000}',
        f'exact_probe{{k="a"}} 123456789012 {(base + 60) * 1000}',
        f'exact_probe{{k="b"}} 2.5 {(base + 60) * 1000}',
    ])
    (only,) = metrics.instant('exact_probe{k="a"}', datetime(year, 6, 1, 0, 0, 30, tzinfo=UTC))
    assert only.labels == {"__name__": "exact_probe", "k": "a"}
    assert only.value == Decimal("0.1")
    assert only.samples[0].timestamp == Decimal(base + 30)
    series = metrics.range("sum by (k) (exact_probe)", base, base + 60, 60)
    got = {s.labels["k"]: [(int(p.timestamp), p.value) for p in s.samples] for s in series}
    assert got == {"a": [(base, Decimal("0.1")), (base + 60, Decimal("123456789012"))],
                   "b": [(base + 60, Decimal("2.5"))]}
    assert metrics.instant("scalar(vector(3))", base)[0].value == 3


def test_nocache_sees_data_imported_after_a_first_query(victoria, metrics, year):
    base = int(datetime(year, 6, 2, tzinfo=UTC).timestamp())
    query = "count_over_time(late_probe[1h])"
    victoria.import_prometheus([f"late_probe 1 {(base + 30) * 1000}"])
    assert metrics.range(query, base + 3600, base + 7200, 3600)[0].samples[0].value == 1
    victoria.import_prometheus([f"late_probe 1 {(base + 90) * 1000}"])
    assert metrics.range(query, base + 3600, base + 7200, 3600)[0].samples[0].value == 2


def test_bad_query_is_permanent(victoria, metrics):
    with pytest.raises(PermanentError):
        metrics.instant("sum by (", 0)


def test_unreachable_server_is_transient():
    client = MetricsClient(f"http://127.0.0.1:{free_port()}", attempts=1)
    with pytest.raises(TransientError, match="unreachable"):
        client.instant("up", 0)


def test_server_errors_and_api_error_types():
    ok = '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2"]}]}}'
    with serve(Reply(500, "oops"), Reply(body=ok)) as server:
        assert MetricsClient(server.url).instant("up", 1)[0].value == 2  # one bounded re-attempt
    assert len(server.requests) == 2
    assert server.requests[0]["form"]["nocache"] == ["1"]
    with serve(Reply(500, "oops")) as server:
        with pytest.raises(TransientError):
            MetricsClient(server.url, attempts=2).instant("up", 1)
    assert len(server.requests) == 2
    timeout = '{"status":"error","errorType":"timeout","error":"query timed out"}'
    with serve(Reply(503, timeout)) as server, pytest.raises(TransientError):
        MetricsClient(server.url, attempts=1).instant("up", 1)
    with serve(Reply(200, timeout)) as server, pytest.raises(TransientError):
        MetricsClient(server.url, attempts=1).instant("up", 1)
    bad = '{"status":"error","errorType":"bad_data","error":"parse error"}'
    with serve(Reply(400, bad)) as server, pytest.raises(PermanentError, match="parse error"):
        MetricsClient(server.url).instant("up", 1)
    assert len(server.requests) == 1
    with serve(Reply(200, "<html/>")) as server, pytest.raises(PermanentError):
        MetricsClient(server.url).instant("up", 1)
    with serve(Reply(200, '{"status":"success","data":{"resultType":"streams"}}')) as server:
        with pytest.raises(PermanentError, match="unsupported"):
            MetricsClient(server.url).instant("up", 1)
    nan = '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"NaN"]}]}}'
    with serve(Reply(200, nan)) as server:
        (sample,) = MetricsClient(server.url).instant("up", 1)[0].samples
        assert sample.value.is_nan() and sample.timestamp == Decimal("1.5")
    with serve(Reply(200, '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},'
                          '"value":[1,"x1"]}]}}')) as server:
        with pytest.raises(PermanentError, match="non-numeric"):
            MetricsClient(server.url).instant("up", 1)


def test_read_timeout_is_transient():
    with serve(Reply(body="{}", delay=1.0)) as server:
        client = MetricsClient(server.url, timeouts=http.Timeouts(connect=1, read=0.2), attempts=1)
        with pytest.raises(TransientError, match="timed out"):
            client.instant("up", 1)


def test_session_always_sends_a_timeout():
    with serve(Reply(body="{}", delay=1.0)) as server:
        session = http.session(http.Timeouts(connect=1, read=0.2))
        for kwargs in ({}, {"timeout": None}):  # forgotten, or explicitly "forever"
            with pytest.raises(requests.Timeout):
                session.get(server.url, **kwargs)
        assert session.get(server.url, timeout=3).status_code == 200  # an explicit one is kept
    with pytest.raises(ValueError):
        http.session(http.Timeouts(connect=0, read=1))


def test_safe_retries_only_for_idempotent_methods():
    with serve(Reply(503, "busy"), Reply(200, "{}")) as server:
        assert http.session(retries=2, backoff=0).get(server.url).status_code == 200
        assert len(server.requests) == 2
    with serve(Reply(503, "busy"), Reply(200, "{}")) as server:
        assert http.session(retries=2, backoff=0).post(server.url, data="x").status_code == 503
        assert len(server.requests) == 1


def test_naive_times_are_refused(metrics):
    with pytest.raises(ValueError):
        metrics.instant("up", datetime(2026, 1, 1))


def test_fast_answer_parsing_equals_the_pair_by_pair_parse():
    """The column-wise fast path and its shared Decimals give exactly the Decimals (value and exponent)
    the pair-by-pair parse gives, and refuse what it refuses."""
    import random

    from infra.metrics import _sample, parse_result

    rng = random.Random(14)
    texts = ["0", "1", "120", "3600", "0.25", "1e3", "1.50", "NaN", "+Inf", "-Inf", "16777336", " 7 ", "-0"]
    stamps = [1767225600, 1767229200, 1767232800]
    series = []
    for n in range(200):
        kind = n % 4
        values = []
        for stamp in stamps:
            t = stamp if kind < 2 else (stamp + 0.5 if kind == 2 else str(stamp))
            values.append([t, rng.choice(texts) if kind != 1 else str(rng.randrange(10**7))])
        series.append({"metric": {"n": str(n)}, "values": values})
    parsed = parse_result({"resultType": "matrix", "result": series})
    for item, got in zip(series, parsed, strict=True):
        want = tuple(_sample(pair) for pair in item["values"])
        assert [(str(a), str(b)) for a, b in got.samples] == [(str(a), str(b)) for a, b in want]
        assert all(type(sample) is type(want[0]) for sample in got.samples)
    for bad in ([[1767225600, "x"]], [[1767225600]], [[1767225600, "1", "2"]], [[True, "1"]]):
        with pytest.raises(PermanentError):
            parse_result({"resultType": "matrix", "result": [{"metric": {}, "values": bad}]})
