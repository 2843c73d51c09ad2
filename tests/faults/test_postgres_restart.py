"""PostgreSQL restarted in the middle of a fleet pass (a private cluster, never the shared server).

The pass in flight loses its connection: it fails (as its Celery task would) or reports the tenants it
could not finish. No tenant is Ready unless its files are committed; the next pass, on a fresh
connection, makes every tenant Ready at its generation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.postgres_server import postgres_server
from tests.support.services import REPO

pytestmark = pytest.mark.service


def test_a_fleet_pass_survives_a_postgres_restart(tmp_path: Path) -> None:
    with postgres_server() as pg:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpufleet.settings.test", "DATABASE_URL": pg.url,
               "CELERY_BROKER_URL": "memory://", "GPUFLEET_GITOPS_REPO": str(tmp_path / "gitops"),
               "GPUFLEET_BACKEND": "gitops", "GPUFLEET_REFERENCE_DIR": str(settings.GPUFLEET_REFERENCE_DIR),
               "GPUFLEET_OPENBAO_ADDR": "", "RESTART_PG": json.dumps(pg.restart_command()),
               "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "platform")])}
        result = subprocess.run([sys.executable, str(Path(__file__).with_name("fleet_pass_with_restart.py"))],
                                env=env, capture_output=True, text=True, cwd=REPO, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    first = report["first"]
    assert first.get("raised") or first.get("errors") or first.get("retry"), report  # the restart was noticed
    for slug, (phase, generation, observed, committed) in report["after_first"].items():
        if phase == "ready":
            assert committed and observed == generation, (slug, report["after_first"])
    assert report["second_errors"] == []
    assert all(phase == "ready" and observed == generation and committed
               for phase, generation, observed, committed in report["after_second"].values()), report["after_second"]
    print(json.dumps(report, indent=1))
