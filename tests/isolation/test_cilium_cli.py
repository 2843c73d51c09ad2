"""infra/cilium.py against stub `cilium`/`hubble` executables replaying recorded upstream output."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from infra.cilium import CiliumCLI
from infra.errors import PermanentError, TransientError
from tests.support import factories

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def stub_path(tmp_path: Path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("cilium", "hubble"):
        target = bin_dir / name
        stub = str(FIXTURES / "stub_cli.py")
        target.write_text(
            f"#!{sys.executable}\nimport os, runpy\nos.environ['STUB_NAME'] = {name!r}\nrunpy.run_path({stub!r})\n"
        )
        target.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("STUB_MODE", "ok")
    return tmp_path


def test_dropped_flows_are_parsed(stub_path: Path) -> None:
    flows = CiliumCLI().dropped_flows("tenant-acme")
    assert [str(f.source) for f in flows] == ["tenant-beta/probe-7d9f", "tenant-acme/trainer-0"]
    first, second = flows
    assert (first.verdict, first.drop_reason, first.direction) == ("DROPPED", "POLICY_DENIED", "INGRESS")
    assert (first.protocol, first.port, str(first.destination)) == ("TCP", 8080, "tenant-acme/trainer-0")
    assert str(second.destination) == "169.254.169.254" and second.port == 80
    calls = (stub_path / "calls.log").read_text()
    assert "hubble observe --namespace tenant-acme --verdict DROPPED --last 100 -o json" in calls


def test_status_health(stub_path: Path, monkeypatch) -> None:
    health = CiliumCLI().status()
    assert health.ok and health.components["cilium"]["ready"] == 3
    monkeypatch.setenv("STUB_MODE", "degraded")
    health = CiliumCLI().status()
    assert not health.ok
    assert "cilium: 2/3 ready, 1 unavailable" in health.problems
    assert "cilium cilium-x7k2p: 1 error(s)" in health.problems


def test_nonzero_exit_is_a_clear_error(stub_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STUB_MODE", "fail")
    with pytest.raises(PermanentError, match=r"`hubble observe` failed \(exit 1\): .*connection refused"):
        CiliumCLI().dropped_flows("tenant-acme")


def test_garbage_output_is_a_clear_error(stub_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STUB_MODE", "garbage")
    with pytest.raises(PermanentError, match="line 1 is not JSON"):
        CiliumCLI().dropped_flows("tenant-acme")
    with pytest.raises(PermanentError, match="not JSON"):
        CiliumCLI().status()


def test_timeout_is_transient(stub_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("STUB_MODE", "hang")
    with pytest.raises(TransientError, match="timed out after 1s"):
        CiliumCLI(timeout=1).status()


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PermanentError, match="`hubble` is not installed"):
        CiliumCLI(env={"PATH": str(tmp_path)}).dropped_flows("tenant-acme")
    assert shutil.which("hubble", path=str(tmp_path)) is None


@pytest.mark.django_db
def test_dropped_flows_endpoint_is_scoped_and_never_500s(stub_path: Path, api, monkeypatch) -> None:
    alice, bob = factories.user("alice"), factories.user("bob")
    acme = factories.tenant("acme", "standard", owner=alice)
    beta = factories.tenant("beta", "standard", owner=bob)
    api.force_authenticate(alice)
    response = api.get(f"/api/v1/tenants/{acme.pk}/dropped-flows/")
    assert response.status_code == 200
    assert response.json()["flows"][0]["drop_reason"] == "POLICY_DENIED"
    assert api.get(f"/api/v1/tenants/{beta.pk}/dropped-flows/").status_code == 404
    monkeypatch.setenv("STUB_MODE", "garbage")
    response = api.get(f"/api/v1/tenants/{acme.pk}/dropped-flows/")
    assert response.status_code == 503 and "not JSON" in response.json()["detail"]


def test_cilium_status_command(stub_path: Path, monkeypatch, capsys) -> None:
    from django.core.management import CommandError, call_command

    call_command("cilium-status")
    assert '"ok": true' in capsys.readouterr().out
    monkeypatch.setenv("STUB_MODE", "degraded")
    with pytest.raises(CommandError, match="2/3 ready"):
        call_command("cilium-status")
    monkeypatch.setenv("STUB_MODE", "fail")
    with pytest.raises(CommandError, match="exit 1"):
        call_command("cilium-status")
