"""Run by tests/faults/test_postgres_restart.py in a process of its own, against a private PostgreSQL.

Six approved tenants; the first fleet pass restarts PostgreSQL just before the third tenant's
reconcile; then a second pass on a fresh connection. Prints what each pass left behind as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from infra.gitops.git import Git  # noqa: E402
from tenants import actions, reconcile  # noqa: E402
from tenants.fleet import reconcile_fleet  # noqa: E402
from tenants.models import Tenant  # noqa: E402


def state() -> dict[str, list]:
    repo = os.environ["GPUFLEET_GITOPS_REPO"]
    committed = Git(Path(repo)).run("ls-tree", "-r", "--name-only", "HEAD", "clusters/default/tenants",
                                    check=False).split()
    return {t.slug: [t.phase, t.generation, t.observed_generation,
                     any(path.startswith(f"clusters/default/tenants/{t.slug}/") for path in committed)]
            for t in Tenant.objects.order_by("slug")}


call_command("migrate", verbosity=0)
for i in range(6):
    actions.approve(actions.request_tenant(f"team-{i}", "standard", f"Team {i}"))

real = reconcile.reconcile_tenant
calls = {"n": 0}


def restarting(tenant_id: int, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
    calls["n"] += 1
    if calls["n"] == 3:
        subprocess.run(json.loads(os.environ["RESTART_PG"]), check=True, capture_output=True)
    return real(tenant_id, *args, **kwargs)


reconcile.reconcile_tenant = restarting
try:
    result = reconcile_fleet(message="pass during a restart")
    first = {"errors": result.errors, "retry": result.retry}
except Exception as exc:  # what a Celery task would see: the task fails, the next pass repairs
    first = {"raised": f"{type(exc).__name__}: {exc}"}
connection.close()  # what Django does between requests and Celery between tasks
after_first = state()
reconcile.reconcile_tenant = real
second = reconcile_fleet(message="pass after the restart")
json.dump({"first": first, "after_first": after_first, "second_errors": second.errors, "after_second": state()},
          sys.stdout)
