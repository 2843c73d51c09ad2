"""The OpenCost client against OpenCost's recorded responses (../shared/reference/opencost), served by a
real local HTTP server: both response shapes, NaN/null safety, retries of 500s and timeouts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from infra import http
from infra.errors import PermanentError, TransientError
from infra.opencost import SHAPE_2024, SHAPE_GPU_ALLOCATION, OpenCostClient, decimal_or_none
from tests.metering.scripted_http import Reply, serve
from tests.support.services import need_reference

START, END = datetime(2026, 8, 1, tzinfo=UTC), datetime(2026, 9, 1, tzinfo=UTC)


def reference(name: str) -> str:
    return (need_reference() / "opencost" / name).read_text()


def client(url: str, **kwargs) -> OpenCostClient:
    kwargs.setdefault("backoff", 0.01)
    return OpenCostClient(url, **kwargs)


def test_2024_shape_and_query_parameters():
    with serve(Reply(body=reference("allocation-compute-example-swagger.json"))) as server:
        allocations = client(server.url).allocation(START, END, aggregate="namespace", include_idle=True)
    assert sorted(allocations) == ["kube-system", "opencost", "prometheus"]
    kube = allocations["kube-system"]
    assert kube.shape == SHAPE_2024
    assert kube.namespace == "kube-system"
    assert kube.total_cost == Decimal("0.425469") and kube.cpu_cost == Decimal("0.408822")
    assert kube.gpu_hours == Decimal("0.0") and kube.gpu_request_average is None
    assert kube.minutes == Decimal("2879.235705")
    assert kube.window_start == datetime(2023, 1, 18, 11, 38, 45, tzinfo=UTC)
    (sent,) = server.requests
    assert sent["path"] == "/allocation/compute"
    assert sent["query"] == {"window": ["2026-08-01T00:00:00Z,2026-09-01T00:00:00Z"], "aggregate": ["namespace"],
                             "accumulate": ["true"], "includeIdle": ["true"], "shareIdle": ["false"]}


def test_ui_example_output_parses():
    with serve(Reply(body=reference("allocation-example-output.json"))) as server:
        allocations = client(server.url + "/model").allocation(START, END)
    assert allocations["kube-system"].total_cost == Decimal("1.52743")
    assert server.requests[0]["path"] == "/model/allocation/compute"


def test_newer_gpu_allocation_shape():
    with serve(Reply(body=reference("allocation-gpu.synthetic.json"))) as server:
        allocations = client(server.url).allocation(START, END, aggregate="container")
    vllm = allocations["gpu-cluster/gpu-node-a/llm/vllm-0/vllm"]
    assert vllm.shape == SHAPE_GPU_ALLOCATION
    assert (vllm.gpu_hours, vllm.gpu_cost, vllm.total_cost) == (Decimal("24.0"), Decimal("60.0"), Decimal("72.57734"))
    assert (vllm.gpu_request_average, vllm.gpu_usage_average) == (Decimal("1"), Decimal("0.71"))
    assert (vllm.gpu_model, vllm.gpu_device, vllm.gpu_shared) == ("NVIDIA H100 80GB HBM3", "nvidia0", False)
    trainer = allocations["gpu-cluster/gpu-node-a/team-a/train-job-0/trainer"]
    assert trainer.namespace == "team-a" and trainer.gpu_request_average == Decimal("2")


def test_nan_null_and_missing_values_become_none():
    body = json.loads(reference("allocation-compute-example-swagger.json"))
    kube = body["data"][0]["kube-system"]
    kube["gpuCost"] = None
    kube["gpuRequestAverage"] = 0.5  # 2024 shape: top level
    del kube["totalCost"]
    text = json.dumps(body).replace('"cpuEfficiency": 0.020932', '"cpuEfficiency": NaN')
    text = text.replace('"ramCost": 0.016647', '"ramCost": Infinity')
    assert "NaN" in text and "Infinity" in text
    with serve(Reply(body=text)) as server:
        parsed = client(server.url).allocation(START, END)["kube-system"]
    assert parsed.gpu_cost is None and parsed.total_cost is None and parsed.ram_cost is None
    assert parsed.gpu_request_average == Decimal("0.5")
    assert parsed.cpu_cost == Decimal("0.408822")
    for raw in (None, float("nan"), float("inf"), "NaN", "abc", True):
        assert decimal_or_none(raw) is None
    assert decimal_or_none("1.50000") == Decimal("1.50000")


def test_500s_are_retried_then_succeed():
    body = reference("allocation-gpu.synthetic.json")
    with serve(Reply(500, "boom"), Reply(503, "busy"), Reply(body=body)) as server:
        allocations = client(server.url).allocation(START, END)
    assert len(server.requests) == 3
    assert len(allocations) == 2


def test_persistent_500_is_reported_after_bounded_retries():
    with serve(Reply(500, "still broken")) as server:
        with pytest.raises(TransientError, match="failed 3 times"):
            client(server.url).allocation(START, END)
    assert len(server.requests) == 3


def test_timeouts_are_retried():
    body = reference("allocation-gpu.synthetic.json")
    fast = http.Timeouts(connect=1, read=0.3)
    with serve(Reply(body=body, delay=1.0), Reply(body=body)) as server:
        allocations = client(server.url, timeouts=fast).allocation(START, END)
    assert len(allocations) == 2 and len(server.requests) == 2
    with serve(Reply(body=body, delay=1.0)) as server:
        with pytest.raises(TransientError, match="timed out"):
            client(server.url, timeouts=fast, attempts=2).allocation(START, END)
    assert len(server.requests) == 2


@pytest.mark.parametrize("reply", [Reply(400, '{"code":400,"message":"bad window"}'), Reply(body="<html>nope</html>"),
                                   Reply(body='{"code": 500, "message": "query failed"}'), Reply(body="[1, 2]")])
def test_permanent_errors_are_not_retried(reply):
    with serve(reply) as server:
        with pytest.raises(PermanentError):
            client(server.url).allocation(START, END)
    assert len(server.requests) == 1


def test_unreachable_and_bad_arguments():
    from tests.support.services import free_port

    with pytest.raises(TransientError, match="unreachable"):
        client(f"http://127.0.0.1:{free_port()}", attempts=2).allocation(START, END)
    with pytest.raises(ValueError):
        client("http://127.0.0.1:1").allocation(END, START)
    with pytest.raises(ValueError):
        client("http://127.0.0.1:1").allocation(datetime(2026, 1, 1), datetime(2026, 2, 1))
    with pytest.raises(PermanentError):
        OpenCostClient("")
