"""Settings shared by every profile. Everything that differs between machines comes from the environment."""

from __future__ import annotations

from pathlib import Path

from .database import LOCAL_URL, database_settings
from .env import env, env_bool, env_list

# platform/gpufleet/settings/base.py -> repository root is three levels up from platform/.
PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PACKAGE_DIR.parent.parent
# Absolute: git and the GitOps writer run in other working directories (a relative GPUFLEET_VAR_DIR broke them).
VAR_DIR = Path(env("GPUFLEET_VAR_DIR", str(REPO_DIR / "var"))).resolve()

SECRET_KEY = env("SECRET_KEY", "insecure-development-key-not-for-production")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "mozilla_django_oidc",
    "gpufleet.audit",
    "gpufleet.outbox",
    "gpufleet.accounts",
    "gpufleet.api",
    "gpufleet.portal",
    "tenants",
    "scheduling",
    "scheduling.nodehealth",
    "billing",
    "scheduling.fleetops",
]

MIDDLEWARE = [
    # First: times every request, including the ones later middleware answers (redirects, 403s).
    "gpufleet.observability.metrics.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Cache-Control: no-store on whatever a signed-in user or a token gets (after the view: DRF's token auth).
    "gpufleet.nostore.NoStoreForAuthenticatedMiddleware",
    # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    # Before anything reads the body or a filter: an oversized body is a 413, a NUL in a query parameter or path
    # value a 400/404 naming it (PostgreSQL refuses NUL in text: it was a 500) (gpufleet/requestguard.py).
    "gpufleet.requestguard.RequestGuardMiddleware",
    # Static files straight from the app: production needs no extra web server or collectstatic step.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "gpufleet.audit.middleware.AuditContextMiddleware",
]

ROOT_URLCONF = "gpufleet.urls"
WSGI_APPLICATION = "gpufleet.wsgi.application"
ASGI_APPLICATION = "gpufleet.asgi.application"

# Every form renders in the portal's one style (label, widget, its errors, help; see the renderer).
FORM_RENDERER = "gpufleet.portal.forms_renderer.PortalFormRenderer"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "gpufleet.portal.context.portal",
            ],
        },
    }
]

DATABASES = {"default": database_settings(env("DATABASE_URL", LOCAL_URL))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "gpufleet.accounts.oidc.GpufleetOIDCBackend",
    # ModelBackend that refuses passwords unless GPUFLEET_PASSWORD_LOGIN (demo and test profiles).
    "gpufleet.accounts.backends.PasswordBackend",
]
LOGIN_URL = "portal:login"
LOGIN_REDIRECT_URL = "portal:home"
LOGOUT_REDIRECT_URL = "portal:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# WhiteNoise serves the apps' static files directly (WHITENOISE_USE_FINDERS), so nothing has to be collected;
# STATIC_ROOT is only for operators who want `collectstatic` (e.g. to put a CDN in front).
STATIC_ROOT = env("GPUFLEET_STATIC_ROOT", None)
WHITENOISE_USE_FINDERS = True

# --- OIDC (authorization code + PKCE) -----------------------------------------------------------
OIDC_OP_ISSUER = env("OIDC_OP_ISSUER", "")
OIDC_RP_CLIENT_ID = env("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env("OIDC_RP_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = env("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env("OIDC_RP_SCOPES", "openid email profile groups")


def oidc_endpoints(issuer: str) -> dict[str, object]:
    """Endpoints of the provider from its discovery document (lazy; see settings/oidc_discovery.py); each
    may be overridden with its OIDC_OP_*_ENDPOINT variable."""
    from .oidc_discovery import endpoints

    return endpoints(issuer, env)


globals().update(oidc_endpoints(OIDC_OP_ISSUER))
OIDC_USE_PKCE = True
# Seconds for each call to the provider (token, userinfo, JWKS); mozilla-django-oidc waits forever by default.
OIDC_TIMEOUT = float(env("OIDC_TIMEOUT", "10") or 10)
OIDC_STORE_ID_TOKEN = True
# Our views 404 while no provider is configured and turn a bad callback into a failed sign-in, not a 500.
OIDC_CALLBACK_CLASS = "gpufleet.accounts.oidc.GpufleetCallbackView"
OIDC_AUTHENTICATE_CLASS = "gpufleet.accounts.oidc.GpufleetAuthenticationRequestView"
# Logout ends the Django session, then the provider's (RP-initiated logout at its end-session endpoint).
OIDC_OP_LOGOUT_URL_METHOD = "gpufleet.accounts.oidc.provider_logout_url"
# The claim that carries group names, mapped to platform roles and tenant memberships.
GPUFLEET_OIDC_GROUPS_CLAIM = env("GPUFLEET_OIDC_GROUPS_CLAIM", "groups")
GPUFLEET_OIDC_USERNAME_CLAIM = env("GPUFLEET_OIDC_USERNAME_CLAIM", "preferred_username")
GPUFLEET_OIDC_ENABLED = bool(OIDC_OP_ISSUER)
# Username/password sign-in exists only in the demo profile.
GPUFLEET_PASSWORD_LOGIN = False

# The largest request body any route takes (bytes): a larger one is a 413 problem on every route, JSON included
# (gpufleet/requestguard.py). 1 MiB: the largest real body is the simulator's scenario upload (512 KiB) with its
# form around it; API payloads are a few KiB (docs/api.md).
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

# --- REST API -------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "gpufleet.accounts.tokens.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "gpufleet.api.pagination.Pagination",
    # A body nested 1,000 deep or with a NUL in a string is a 400 naming the field (gpufleet/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "gpufleet.api.parsers.BoundedJSONParser",
        "gpufleet.api.parsers.NulFreeFormParser",
        "gpufleet.api.parsers.NulFreeMultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "gpufleet.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
# Rendered GET answers kept per process, keyed by caller, request and the fleet's data version
# (gpufleet/api/answercache.py); 0 turns the cache off.
GPUFLEET_API_CACHE_BYTES = int(env("GPUFLEET_API_CACHE_BYTES", str(32 * 1024 * 1024)) or 0)
# A web worker freezes its startup objects out of the garbage collector's full passes, whose pause every
# request in flight in that process waits for (gpufleet/gcfreeze.py); 0 turns that off.
GPUFLEET_GC_FREEZE = env_bool("GPUFLEET_GC_FREEZE", True)
SPECTACULAR_SETTINGS = {
    "TITLE": "gpufleet API",
    "DESCRIPTION": "Tenants, quotas, usage and invoices of a shared GPU fleet.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "gpufleet.api.schema.declare_problems",
        "gpufleet.api.schema.close_request_bodies",
    ],
    # One name per choice set (without these, drf-spectacular names colliding enums by hash).
    "ENUM_NAME_OVERRIDES": {
        "TrustLevelEnum": "tenants.models.TrustLevel",
        "MembershipRoleEnum": "tenants.models.Membership.Role",
        "MembershipSourceEnum": "tenants.models.Membership.Source",
        # Quota and placement change requests share one review life cycle (pending, approved, rejected).
        "ReviewStateEnum": "scheduling.models.QuotaChangeRequest.State",
    },
    # The schema lists every route and field: signed-in callers and API tokens only (docs/api.md).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
}

# --- Content-Security-Policy (django-csp 4) -----------------------------------------------------------
# The portal ships no inline script or style and loads nothing from elsewhere: everything is 'self'.
# Forms may also lead to the OIDC provider (sign-out is a POST that redirects to its end-session page).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'", *([OIDC_OP_ISSUER.rstrip("/")] if OIDC_OP_ISSUER else [])],
    }
}

# --- Celery ---------------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", "celery")
# Delivery (docs/operations.md, "A worker is killed"): a message is acknowledged only after its task ran
# (acks_late); a pool child that dies requeues its message at once (reject_on_worker_lost); a whole worker
# killed with SIGKILL leaves its message unacknowledged in Redis, and another worker restores it once it is
# older than the visibility timeout (checked every 5 s) -- so lost work runs again within ~40 s. A task
# running longer than the timeout is delivered twice; every task is idempotent, so that costs a pass.
GPUFLEET_VISIBILITY_TIMEOUT_SECONDS = int(env("GPUFLEET_VISIBILITY_TIMEOUT_SECONDS", "30") or 30)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": GPUFLEET_VISIBILITY_TIMEOUT_SECONDS,
    "unacked_restore_interval": 5,
    "unacked_restore_throttle": 1,  # scan on every tick, not every 10th
    # A request that publishes must not hang on a broker that is gone (the outbox keeps the work).
    "socket_connect_timeout": 3,
    "socket_timeout": 10,
}
# Publishing gives up quickly: the work is already in gpufleet.outbox and the relay sends it later.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# Beat (and every worker as it starts) sends what the outbox holds once the broker is reachable again.
GPUFLEET_OUTBOX_RELAY_SECONDS = int(env("GPUFLEET_OUTBOX_RELAY_SECONDS", "10") or 10)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No task runs forever: a hung git, API or database call is interrupted (soft: SoftTimeLimitExceeded, which
# the task may catch to record its state), then killed (hard). A fleet pass over thousands of tenants is
# the longest task (benchmarks/reconcile.py); both are settable per deployment.
CELERY_TASK_SOFT_TIME_LIMIT = int(env("CELERY_TASK_SOFT_TIME_LIMIT", "1500") or 1500)
CELERY_TASK_TIME_LIMIT = int(env("CELERY_TASK_TIME_LIMIT", "1800") or 1800)
GPUFLEET_RECONCILE_ALL_SECONDS = int(env("GPUFLEET_RECONCILE_ALL_SECONDS", "300") or 300)
# Fleet sync (scheduling.sync_fleet): re-apply everything, repair and count drift, record a SyncRun.
GPUFLEET_SYNC_FLEET_SECONDS = int(env("GPUFLEET_SYNC_FLEET_SECONDS", "600") or 600)
# Node health pass (scheduling.nodehealth.tasks): classify GPU nodes and remediate within the limits; 0 = off.
GPUFLEET_NODE_HEALTH_SECONDS = int(env("GPUFLEET_NODE_HEALTH_SECONDS", "300") or 0)
# Fleet-operations roll-ups (scheduling/fleetops/rollup.py): the hourly task's horizon, and how long after an
# hour ends late samples still count (an hour rolled up earlier is recomputed; reports read it raw until then).
GPUFLEET_FLEETOPS_ROLLUP_HOURS = int(env("GPUFLEET_FLEETOPS_ROLLUP_HOURS", "48") or 48)
GPUFLEET_FLEETOPS_LATE_SECONDS = int(env("GPUFLEET_FLEETOPS_LATE_SECONDS", "3600") or 3600)
# The DCGM label that names the node (dcgm-exporter sets Hostname from NODE_NAME).
GPUFLEET_DCGM_NODE_LABEL = env("GPUFLEET_DCGM_NODE_LABEL", "Hostname")
# Days of recorded demand a quota request's simulation replays (scheduling/simulation/quota.py).
GPUFLEET_QUOTA_SIMULATION_DAYS = int(env("GPUFLEET_QUOTA_SIMULATION_DAYS", "7") or 7)

# --- Backends -------------------------------------------------------------------------------------
GPUFLEET_BACKEND = env("GPUFLEET_BACKEND", "gitops")
GPUFLEET_GITOPS_REPO = env("GPUFLEET_GITOPS_REPO", str(VAR_DIR / "gitops"))
GPUFLEET_GITOPS_AUTHOR = env("GPUFLEET_GITOPS_AUTHOR", "gpufleet <gpufleet@localhost>")
# The remote Flux or Argo CD reads (pushed to by the chart's sidecar). A missing working copy is cloned
# from it (a lost volume continues the remote's history); with push enabled a tenant is Ready only once
# its commit is on the remote.
GPUFLEET_GITOPS_REMOTE = env("GPUFLEET_GITOPS_REMOTE", "") or ""
GPUFLEET_GITOPS_REMOTE_BRANCH = env("GPUFLEET_GITOPS_REMOTE_BRANCH", "main") or "main"
GPUFLEET_GITOPS_PUSH = env_bool("GPUFLEET_GITOPS_PUSH", False)
# Where the push sidecar records its rounds (helm/gpufleet/files/gitops-push.sh); "" = <repo>/.git/gpufleet.
GPUFLEET_GITOPS_PUSH_STATUS_DIR = env("GPUFLEET_GITOPS_PUSH_STATUS_DIR", "") or ""
# Processes that render, validate and serialise ahead on a fleet pass of more than one chunk (the cold
# start: tenants/prerender.py); "" = one per core, at most 2 (none on one core); 0 = render inline.
GPUFLEET_RECONCILE_WORKERS = int(env("GPUFLEET_RECONCILE_WORKERS", "") or -1)
# Upstream schemas (CRDs, vCluster values schema) used to validate rendered manifests before apply.
GPUFLEET_REFERENCE_DIR = env("GPUFLEET_REFERENCE_DIR", str(REPO_DIR.parent / "shared" / "reference"))
GPUFLEET_KUBERNETES_VERSION = env("GPUFLEET_KUBERNETES_VERSION", "1.33")
# Kubernetes backend (GPUFLEET_BACKEND=kubernetes): a kubeconfig file, else the pod's service account.
GPUFLEET_KUBECONFIG = env("GPUFLEET_KUBECONFIG", "")
GPUFLEET_KUBE_CONTEXT = env("GPUFLEET_KUBE_CONTEXT", "")
GPUFLEET_KUBE_FIELD_MANAGER = env("GPUFLEET_KUBE_FIELD_MANAGER", "gpufleet")
# Kubernetes backend with several host clusters: each cluster's `kubeconfig_secret` names a Secret mounted here as
# <dir>/<secret>/kubeconfig (or is an absolute path); credentials are never stored in the database.
GPUFLEET_CLUSTER_KUBECONFIG_DIR = env("GPUFLEET_CLUSTER_KUBECONFIG_DIR", "/var/run/gpufleet/clusters")

# --- OpenBao / Vault (tenant secrets) --------------------------------------------------------------
# Unset address: the reconcile skips the secrets step and says so in the tenant's `Secrets` condition.
GPUFLEET_OPENBAO_ADDR = env("GPUFLEET_OPENBAO_ADDR", "")
GPUFLEET_OPENBAO_TOKEN = env("GPUFLEET_OPENBAO_TOKEN", "")  # or AppRole below
GPUFLEET_OPENBAO_ROLE_ID = env("GPUFLEET_OPENBAO_ROLE_ID", "")
GPUFLEET_OPENBAO_SECRET_ID = env("GPUFLEET_OPENBAO_SECRET_ID", "")
GPUFLEET_OPENBAO_APPROLE_PATH = env("GPUFLEET_OPENBAO_APPROLE_PATH", "approle")
GPUFLEET_OPENBAO_MOUNT = env("GPUFLEET_OPENBAO_MOUNT", "gpufleet")
GPUFLEET_OPENBAO_KUBERNETES_AUTH = env("GPUFLEET_OPENBAO_KUBERNETES_AUTH", "kubernetes")

# --- vCluster --------------------------------------------------------------------------------------
GPUFLEET_VCLUSTER_CHART_VERSION = env("GPUFLEET_VCLUSTER_CHART_VERSION", "0.36.1")
# A vCluster syncer image that keeps host-side scheduling gates (v0.36.1 + loft-sh/vcluster#4107, until a
# release carries the fix), "registry/repository:tag". Empty: the chart's image, which strips Kueue's gate, so
# the platform refuses GPU pods and says so (tenant condition GpuWorkloads, doctor; docs/compatibility.md#b3).
GPUFLEET_VCLUSTER_SYNCER_IMAGE = env("GPUFLEET_VCLUSTER_SYNCER_IMAGE", "")
GPUFLEET_VCLUSTER_CHART_REPO = env("GPUFLEET_VCLUSTER_CHART_REPO", "https://charts.loft.sh")
GPUFLEET_FLUX_NAMESPACE = env("GPUFLEET_FLUX_NAMESPACE", "flux-system")

# --- Tenant isolation (vCluster OIDC, kubeconfig, Cilium) ----------------------------------------------
# The virtual API servers trust this issuer (default: the portal's) for this client id (kubelogin, PKCE).
GPUFLEET_VCLUSTER_OIDC_ISSUER = env("GPUFLEET_VCLUSTER_OIDC_ISSUER", "")
GPUFLEET_VCLUSTER_OIDC_CLIENT_ID = env("GPUFLEET_VCLUSTER_OIDC_CLIENT_ID", "gpufleet-vcluster")
GPUFLEET_VCLUSTER_URL_TEMPLATE = env("GPUFLEET_VCLUSTER_URL_TEMPLATE", "https://{slug}.vcluster.example.com")
# PEM file with the CA that signs the vCluster endpoints, when the per-vCluster CA is not known.
GPUFLEET_VCLUSTER_CA_BUNDLE = env("GPUFLEET_VCLUSTER_CA_BUNDLE", "")
# The platform issues each vCluster's serving CA into OpenBao; External Secrets copies it into the tenant
# namespace through this ClusterSecretStore (the operator's, pointing at GPUFLEET_OPENBAO_ADDR) and the chart
# mounts it. Empty: the vCluster generates its own CA, which no kubeconfig can carry (docs/compatibility.md, B6).
GPUFLEET_VCLUSTER_CA_STORE = env("GPUFLEET_VCLUSTER_CA_STORE", "gpufleet-openbao")
# Refuse to hand out a kubeconfig that carries no CA (issue 26, F2): kubectl could not verify the vCluster. The
# error names the missing setting. Off only in the demo without OpenBao and in tests of the document's shape;
# the production profile pins it on.
GPUFLEET_KUBECONFIG_REQUIRE_CA = env_bool("GPUFLEET_KUBECONFIG_REQUIRE_CA", True)
# Where the ingress controller runs: the only path allowed into a tenant's vCluster API.
GPUFLEET_INGRESS_NAMESPACE = env("GPUFLEET_INGRESS_NAMESPACE", "ingress-nginx")
GPUFLEET_INGRESS_LABELS = dict(
    item.split("=", 1) for item in env_list("GPUFLEET_INGRESS_LABELS", ["app.kubernetes.io/name=ingress-nginx"])
)
GPUFLEET_HUBBLE_TIMEOUT_SECONDS = float(env("GPUFLEET_HUBBLE_TIMEOUT_SECONDS", "10") or 10)
# Namespace of the metrics scraper allowed into tenant namespaces (vLLM metrics for KEDA, DCGM).
GPUFLEET_MONITORING_NAMESPACE = env("GPUFLEET_MONITORING_NAMESPACE", "monitoring")
# The host clusters serve prometheus-operator's CRDs (ServiceMonitor): Kueue's chart then renders its
# ServiceMonitor (enablePrometheus). Off by default: no prerequisite the platform requires installs those CRDs,
# and an object whose CRD is absent fails the whole controllers stage (issue 26, F11; docs/operator-guide.md).
GPUFLEET_PROMETHEUS_OPERATOR = env_bool("GPUFLEET_PROMETHEUS_OPERATOR", False)

# --- Scheduling (Kueue, KAI, KEDA, Karpenter) ------------------------------------------------------
# Prometheus-compatible query endpoint (VictoriaMetrics) that KEDA's triggers and billing read.
GPUFLEET_METRICS_URL = env("GPUFLEET_METRICS_URL", "http://vmsingle.monitoring.svc:8428")
# Its query language: "metricsql" (VictoriaMetrics; fewer rollups per measurement) or "promql" (any
# Prometheus-API TSDB). Both measure the same numbers (gpufleet.core.metrics).
GPUFLEET_METRICS_DIALECT = env("GPUFLEET_METRICS_DIALECT", "metricsql")
# Kueue's fair sharing (Configuration.fairSharing). Off: classical preemption, which borrowWithinCohort
# needs; on: ClusterQueue/Cohort fairSharing.weight is rendered and borrowWithinCohort is not. Must match
# the Kueue configuration the platform installs (docs/scheduling.md).
GPUFLEET_KUEUE_FAIR_SHARING = env_bool("GPUFLEET_KUEUE_FAIR_SHARING", False)
GPUFLEET_DEFAULT_COHORT = env("GPUFLEET_DEFAULT_COHORT", "gpufleet")
# MultiKueue mode (scheduling.clusters.multikueue): a tenant's home cluster dispatches jobs that name the
# `gpu-dispatch` LocalQueue to its other placements. Needs Kueue's MultiKueue feature (beta, on by default)
# and, on each manager, a Secret `multikueue-<worker>` (key `kubeconfig`) in Kueue's namespace per worker.
GPUFLEET_MULTIKUEUE = env_bool("GPUFLEET_MULTIKUEUE", False)
GPUFLEET_TOPOLOGY_NAME = env("GPUFLEET_TOPOLOGY_NAME", "gpu-topology")
# Node labels from the widest to the narrowest domain (block = NVLink/IB domain, rack, host), e.g.
# "gpufleet.io/topology-block,gpufleet.io/topology-rack,kubernetes.io/hostname". None by default. They label each
# pool's nodes and feed KAI's Topology; Kueue's topology-aware scheduling is never used (docs/compatibility.md#b1).
GPUFLEET_TOPOLOGY_LEVELS = env_list("GPUFLEET_TOPOLOGY_LEVELS", [])
# The CPU NodePool of each dedicated (untrusted) tenant, for its pods without GPUs (CoreDNS first): instance types,
# Karpenter node class and cpu limit (docs/compatibility.md#b4).
GPUFLEET_CPU_POOL_INSTANCE_TYPES = env_list("GPUFLEET_CPU_POOL_INSTANCE_TYPES",
                                            ["m7i.large", "m7i.xlarge", "m7i.2xlarge"])
GPUFLEET_CPU_POOL_NODE_CLASS = env("GPUFLEET_CPU_POOL_NODE_CLASS", "default")
GPUFLEET_CPU_POOL_CPU_LIMIT = int(env("GPUFLEET_CPU_POOL_CPU_LIMIT", "16") or 16)
GPUFLEET_BUSINESS_TIMEZONE = env("GPUFLEET_BUSINESS_TIMEZONE", "UTC")
# The model hub inference endpoints download weights from: their serving pods may reach these names (port 443)
# and nothing else outside the cluster, whatever the tenant's trust level (scheduling.endpoints).
GPUFLEET_MODEL_HUB_FQDNS = env_list("GPUFLEET_MODEL_HUB_FQDNS", ["huggingface.co", "**.huggingface.co", "**.hf.co"])
GPUFLEET_KARPENTER_NODE_CLASS_GROUP = env("GPUFLEET_KARPENTER_NODE_CLASS_GROUP", "karpenter.k8s.aws")
GPUFLEET_KARPENTER_NODE_CLASS_KIND = env("GPUFLEET_KARPENTER_NODE_CLASS_KIND", "EC2NodeClass")

# /metrics answers requests that came through a proxy (X-Forwarded-For) only when this is set.
GPUFLEET_METRICS_PUBLIC = env_bool("GPUFLEET_METRICS_PUBLIC", False)
# LOG_FORMAT=json: one JSON object per line with the request id (gpufleet/observability/logs.py).
LOG_FORMAT = env("LOG_FORMAT", "text")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "gpufleet.observability.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             **({"formatter": "json"} if LOG_FORMAT == "json" else {})}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
}
