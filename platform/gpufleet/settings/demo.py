"""Demo profile: an embedded PostgreSQL, tasks run in the web process, GitOps into a local repo, password sign-in."""

from gpufleet import embedded_db

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
