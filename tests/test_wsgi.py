"""The WSGI entry point gunicorn imports in each web worker (gpufleet/wsgi.py): before serving, the worker has
loaded its URLconf (views, serializers) and frozen its startup objects out of the garbage collector's full
passes (gpufleet/gcfreeze.py), so a full pass visits what requests created since, not the whole process.

Each case runs in a subprocess: freezing the test process would keep its objects from ever being collected."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.services import REPO
from tests.test_settings_profiles import BASE_ENV, production_env

# What a worker does, then what a full pass would visit. QuotaViewSet is imported by the URLconf only.
PROBE = """
import gc, json, sys
from gpufleet.wsgi import application
view = sys.modules.get("scheduling.api.views")
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "views_imported": view is not None,
    "view_class_visited": view is not None and any(o is view.QuotaViewSet for o in gc.get_objects()),
}))
"""


def probe(**env: str) -> dict[str, object]:
    result = subprocess.run([sys.executable, "-c", PROBE], env=production_env({**BASE_ENV, **env}),
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_web_worker_freezes_its_loaded_urlconf_out_of_full_collections() -> None:
    worker = probe()
    assert worker["views_imported"]  # loaded before the freeze, not by the first request after it
    assert not worker["view_class_visited"]  # frozen: no pass visits it
    assert int(worker["frozen"]) > 50_000
    # What a full pass still visits right after startup: a small fraction of the process.
    assert int(worker["tracked"]) < int(worker["frozen"]) // 20


def test_gc_freeze_off_leaves_every_object_to_the_collector() -> None:
    worker = probe(GPUFLEET_GC_FREEZE="0")
    assert worker["frozen"] == 0
    assert int(worker["tracked"]) > 50_000  # what each full pass would visit without the freeze
    assert not worker["views_imported"] or worker["view_class_visited"]
