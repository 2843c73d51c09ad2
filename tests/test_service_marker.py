"""The `service` marker's promise (pyproject.toml): in CI a skipped service test is a failure.

The probe below skips only when this file's own test runs it in a child pytest; in a normal run it
passes without doing anything.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.services import REPO

PROBE = "GPUFLEET_SERVICE_MARKER_PROBE"


@pytest.mark.service
def test_probe() -> None:
    if os.environ.get(PROBE) == "1":
        pytest.skip("probe: the component is absent")


def _run_probe(require: str) -> subprocess.CompletedProcess:
    env = {**os.environ, PROBE: "1", "GPUFLEET_REQUIRE_SERVICES": require}
    argv = [sys.executable, "-m", "pytest", f"{__file__}::test_probe", "-q", "-p", "no:cacheprovider"]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_skipped_service_test_fails_in_ci_and_skips_elsewhere() -> None:
    ci = _run_probe("1")
    assert ci.returncode == 1, ci.stdout
    assert "1 failed" in ci.stdout and "skipped in CI" in ci.stdout
    local = _run_probe("")
    assert local.returncode == 0, local.stdout
    assert "1 skipped" in local.stdout
