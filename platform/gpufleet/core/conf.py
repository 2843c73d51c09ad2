"""Every GPUFLEET_* setting, declared once: its type, default, source and what it does.

    from gpufleet.core import conf
    conf.BILLING_CURRENCY                 # "USD" (a str)
    conf.get("GPUFLEET_BILLING_CURRENCY")  # the same
    conf.UNKNOWN_THING                    # AttributeError: no such setting

Values are read on every access, never cached at import, so a test's `settings` fixture,
`override_settings` or `monkeypatch.setenv` is seen at once.

Each setting keeps the source it has always had (`Source`): most are Django settings that the settings
modules (gpufleet/settings/*) map from the environment at startup; the billing ones are a Django setting
when one is defined, else read from the environment at call time; a few are read from the process
environment only (a worker's metrics port, the liveness probe's timeout...). The settings modules stay
the place that maps the environment to Django settings; this module never writes one.

The operator guide's settings table is generated from these declarations (`python -m gpufleet.core.conf`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Generic, TypeVar, overload

from django.conf import settings as django_settings

T = TypeVar("T")
PREFIX = "GPUFLEET_"
TRUE = frozenset({"1", "true", "yes", "on"})


class Source(Enum):
    """Where a setting's value comes from, in order; the declared default when none has it."""

    DJANGO = "Django setting"
    DJANGO_THEN_ENV = "Django setting, else environment"
    ENV = "environment"
    ENV_THEN_DJANGO = "environment, else Django setting"


class UnknownSetting(LookupError):
    """A name no declaration here carries: a typo, or a setting someone forgot to declare."""


def _flag(value: Any) -> bool:
    # The settings modules' env_bool and billing's old flag(): a bool as is, else one of TRUE's words.
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE


def _text(value: Any) -> str:
    # `getattr(settings, X, "") or ""` was the common read: an unset (None) value is the empty string.
    return "" if value is None else str(value)


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):  # the environment's comma-separated form (settings/env.py env_list)
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return tuple(value)


def _labels(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return dict(value)
    return dict(item.split("=", 1) for item in _names(value))  # "key=value,key=value" (settings/base.py)


@dataclass(frozen=True)
class Kind(Generic[T]):
    """A setting's type: its name in the docs and how a Django value or environment text becomes one."""

    name: str
    convert: Callable[[Any], T]


TEXT: Kind[str] = Kind("str", _text)
INT: Kind[int] = Kind("int", int)
FLOAT: Kind[float] = Kind("float", float)
FLAG: Kind[bool] = Kind("bool", _flag)
DECIMAL: Kind[Decimal] = Kind("Decimal", lambda value: Decimal(str(value)))
NAMES: Kind[tuple[str, ...]] = Kind("tuple of str", _names)
LABELS: Kind[dict[str, str]] = Kind("dict of str", _labels)

_MISSING = object()


class Setting(Generic[T]):
    """One declared setting; read as an attribute of `Settings` it is the current, typed value."""

    def __init__(self, kind: Kind[T], default: T, doc: str, source: Source = Source.DJANGO,
                 shown_default: str | None = None) -> None:
        self.kind = kind
        self.default = default
        self.doc = doc
        self.source = source
        # For defaults the settings modules compute (a path under GPUFLEET_VAR_DIR...): what the docs show.
        self.shown_default = shown_default
        self.name = ""

    def __set_name__(self, owner: type, attr: str) -> None:
        self.name = PREFIX + attr

    @overload
    def __get__(self, obj: None, owner: type) -> Setting[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object | None, owner: type) -> Setting[T] | T:
        return self if obj is None else self.value()

    def environment(self) -> T | None:
        """The value in the process environment now, None when unset or empty."""
        text = os.environ.get(self.name)
        return None if text in (None, "") else self.kind.convert(text)

    def django(self) -> Any:
        return getattr(django_settings, self.name, _MISSING)

    def value(self) -> T:
        order: tuple[Callable[[], Any], ...] = {
            Source.DJANGO: (self.django,),
            Source.DJANGO_THEN_ENV: (self.django, self.environment),
            Source.ENV: (self.environment,),
            # An environment value wins over the Django setting the settings modules computed at startup, and
            # an empty one of those falls through to the default (scheduling.nodehealth's node label).
            Source.ENV_THEN_DJANGO: (self.environment, lambda: self.django() or None),
        }[self.source]
        for read in order:
            found = read()
            if found is not _MISSING and found is not None:
                return self.kind.convert(found)
        return self.default

    def shown(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, tuple):
            return ",".join(self.default)
        if isinstance(self.default, dict):
            return ",".join(f"{key}={value}" for key, value in self.default.items())
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


class Settings:
    """The declarations. An attribute read is the setting's current value (see `Setting.value`)."""

    # --- Sign-in and the web process ---------------------------------------------------------------------
    OIDC_ENABLED = Setting(FLAG, False, "Sign-in through the OIDC provider (set by the profile: on when "
                           "OIDC_OP_ISSUER is set; always on in production).", shown_default="OIDC_OP_ISSUER set")
    OIDC_GROUPS_CLAIM = Setting(TEXT, "groups", "The ID-token claim that carries group names (roles, memberships).")
    OIDC_USERNAME_CLAIM = Setting(TEXT, "preferred_username", "The claim a new user's username comes from.")
    PASSWORD_LOGIN = Setting(FLAG, False, "Username/password sign-in (set by the profile: demo and test only).")
    AUTO_MIGRATE = Setting(FLAG, False, "`gpufleet` commands migrate the database first (set by the demo profile).")
    API_CACHE_BYTES = Setting(INT, 32 * 1024 * 1024, "Bytes of rendered GET answers each process keeps "
                              "(gpufleet/api/answercache.py); 0 turns the cache off.")
    GC_FREEZE = Setting(FLAG, True, "A web worker freezes its startup objects out of the garbage collector's "
                        "full passes (gpufleet/gcfreeze.py).")
    BODY_TIMEOUT_SECONDS = Setting(FLOAT, 2.0, "Seconds a request body may take to arrive (gpufleet/bodydeadline.py).",
                                   Source.ENV)
    METRICS_PUBLIC = Setting(FLAG, False, "/metrics answers requests that came through a proxy (X-Forwarded-For).")
    STATIC_ROOT = Setting(TEXT, "", "Where `collectstatic` writes the static files (read by the settings modules).",
                          Source.ENV)
    VAR_DIR = Setting(TEXT, "", "The directory of local state: the GitOps repository, the demo's database and "
                      "OpenBao (read by the settings modules).", Source.ENV, shown_default="<repository>/var")
    TEST_DB_NAME = Setting(TEXT, "", "The test profile's database name (default: one per test run).", Source.ENV)

    # --- Celery: delivery and periodic tasks --------------------------------------------------------------
    VISIBILITY_TIMEOUT_SECONDS = Setting(INT, 30, "Seconds before an unacknowledged task message is delivered "
                                         "again (a killed worker's work runs again).")
    OUTBOX_RELAY_SECONDS = Setting(INT, 10, "Seconds between beat's relays of the task outbox.")
    RECONCILE_ALL_SECONDS = Setting(INT, 300, "Seconds between fleet reconcile passes (60 in the demo).")
    SYNC_FLEET_SECONDS = Setting(INT, 600, "Seconds between fleet syncs (re-apply everything, count drift).")
    NODE_HEALTH_SECONDS = Setting(INT, 300, "Seconds between node health passes; 0 turns them off (the demo's).")
    FLEETOPS_ROLLUP_HOURS = Setting(INT, 48, "Hours the fleet-operations roll-up task looks back.")
    FLEETOPS_LATE_SECONDS = Setting(INT, 3600, "Seconds after an hour ends that late samples still count.")
    QUOTA_SIMULATION_DAYS = Setting(INT, 7, "Days of recorded demand a quota request's simulation replays.")
    WORKER_METRICS_PORT = Setting(INT, 0, "Port of a worker's Prometheus endpoint; unset: none.", Source.ENV)
    WORKER_METRICS_ADDR = Setting(TEXT, "127.0.0.1", "Address a worker's metrics endpoint binds (the chart: the "
                                  "pod IP).", Source.ENV)
    LIVENESS_TIMEOUT = Setting(FLOAT, 10.0, "Seconds the worker liveness probe waits for a ping answer.", Source.ENV)

    # --- Backends -----------------------------------------------------------------------------------------
    BACKEND = Setting(TEXT, "gitops", "Where desired state goes: `gitops` (a git repository) or `kubernetes`.")
    GITOPS_REPO = Setting(TEXT, "", "The GitOps working copy.", shown_default="<GPUFLEET_VAR_DIR>/gitops")
    GITOPS_AUTHOR = Setting(TEXT, "gpufleet <gpufleet@localhost>", "Author of the GitOps commits.")
    GITOPS_REMOTE = Setting(TEXT, "", "The remote Flux or Argo CD reads; a missing working copy is cloned from it.")
    GITOPS_REMOTE_BRANCH = Setting(TEXT, "main", "The remote's branch.")
    GITOPS_PUSH = Setting(FLAG, False, "Push to the remote; a tenant is Ready only once its commit is there.")
    GITOPS_PUSH_STATUS_DIR = Setting(TEXT, "", "Where the push sidecar records its rounds; empty: "
                                     "<repository>/.git/gpufleet.")
    RECONCILE_WORKERS = Setting(INT, -1, "Processes rendering ahead on a cold fleet pass; -1 (unset): one per "
                                "core, at most 2; 0: render inline.")
    REFERENCE_DIR = Setting(TEXT, "", "Upstream schemas (CRDs, vCluster values) rendered manifests are validated "
                            "against.", shown_default="<repository>/../shared/reference")
    KUBERNETES_VERSION = Setting(TEXT, "1.33", "Kubernetes version of the core schemas used for validation.")
    KUBECONFIG = Setting(TEXT, "", "Kubernetes backend: a kubeconfig file; empty: the pod's service account.")
    KUBE_CONTEXT = Setting(TEXT, "", "The kubeconfig context; empty: its current one.")
    KUBE_FIELD_MANAGER = Setting(TEXT, "gpufleet", "Server-side apply field manager.")
    CLUSTER_KUBECONFIG_DIR = Setting(TEXT, "/var/run/gpufleet/clusters", "Where each host cluster's kubeconfig "
                                     "Secret is mounted (<dir>/<secret>/kubeconfig).")

    # --- OpenBao (tenant secrets) -------------------------------------------------------------------------
    OPENBAO_ADDR = Setting(TEXT, "", "OpenBao (or Vault) address; empty: the secrets step is skipped.")
    OPENBAO_TOKEN = Setting(TEXT, "", "OpenBao token (or an AppRole below).")
    OPENBAO_ROLE_ID = Setting(TEXT, "", "OpenBao AppRole role id.")
    OPENBAO_SECRET_ID = Setting(TEXT, "", "OpenBao AppRole secret id.")
    OPENBAO_APPROLE_PATH = Setting(TEXT, "approle", "Mount path of the AppRole auth method.")
    OPENBAO_MOUNT = Setting(TEXT, "gpufleet", "The KV v2 mount tenant secrets live in.")
    OPENBAO_KUBERNETES_AUTH = Setting(TEXT, "kubernetes", "Mount path of the Kubernetes auth method.")

    # --- vCluster and tenant isolation --------------------------------------------------------------------
    VCLUSTER_CHART_VERSION = Setting(TEXT, "0.36.1", "vCluster chart version of every tenant's virtual cluster.")
    VCLUSTER_CHART_REPO = Setting(TEXT, "https://charts.loft.sh", "The vCluster chart's Helm repository.")
    VCLUSTER_SYNCER_IMAGE = Setting(TEXT, "", "A vCluster syncer image that keeps scheduling gates; empty: the "
                                    "chart's, and GPU pods are refused (docs/compatibility.md#b3).")
    FLUX_NAMESPACE = Setting(TEXT, "flux-system", "Namespace of the Flux objects the platform renders.")
    VCLUSTER_OIDC_ISSUER = Setting(TEXT, "", "Issuer the virtual API servers trust; empty: the portal's "
                                   "(OIDC_OP_ISSUER).")
    VCLUSTER_OIDC_CLIENT_ID = Setting(TEXT, "gpufleet-vcluster", "OIDC client id of kubectl (kubelogin).")
    VCLUSTER_URL_TEMPLATE = Setting(TEXT, "https://{slug}.vcluster.example.com", "https URL of each tenant's "
                                    "vCluster API, with {slug} (required in production).")
    VCLUSTER_CA_BUNDLE = Setting(TEXT, "", "PEM file with the CA of the vCluster endpoints, when the platform "
                                 "issues none.")
    VCLUSTER_CA_STORE = Setting(TEXT, "gpufleet-openbao", "ClusterSecretStore that copies each vCluster's "
                                "serving CA from OpenBao; empty: the platform issues no CA.")
    KUBECONFIG_REQUIRE_CA = Setting(FLAG, True, "Refuse a kubeconfig that carries no CA (off in the test "
                                    "profile and the demo without OpenBao).")
    INGRESS_NAMESPACE = Setting(TEXT, "ingress-nginx", "Where the ingress controller runs: the only path into a "
                                "tenant's vCluster API.")
    INGRESS_LABELS = Setting(LABELS, {"app.kubernetes.io/name": "ingress-nginx"}, "Labels of the ingress "
                             "controller's pods (key=value,...).")
    HUBBLE_TIMEOUT_SECONDS = Setting(FLOAT, 10.0, "Seconds a Hubble (Cilium) flow query may take.")
    MONITORING_NAMESPACE = Setting(TEXT, "monitoring", "Namespace of the metrics scraper allowed into tenant "
                                   "namespaces.")
    PROMETHEUS_OPERATOR = Setting(FLAG, False, "The host clusters serve prometheus-operator's CRDs: Kueue's "
                                  "ServiceMonitor and the capacity rules are rendered.")

    # --- Scheduling (Kueue, KAI, KEDA, Karpenter) and node health -----------------------------------------
    METRICS_URL = Setting(TEXT, "http://vmsingle.monitoring.svc:8428", "Prometheus-compatible query endpoint "
                          "(VictoriaMetrics) that billing, KEDA and the fleet pages read.")
    METRICS_DIALECT = Setting(TEXT, "metricsql", "The metrics sources' query language: `metricsql` "
                              "(VictoriaMetrics; fewer rollups per measurement) or `promql` (any Prometheus-API "
                              "TSDB); both measure the same numbers.")
    PG_COPY = Setting(FLAG, True, "Write usage rows and invoice lines with PostgreSQL's binary COPY (ADR 0002); "
                      "off: the same rows through the ORM's bulk_create.", Source.DJANGO_THEN_ENV)
    KUEUE_FAIR_SHARING = Setting(FLAG, False, "Kueue's fair sharing; off: classical preemption.")
    DEFAULT_COHORT = Setting(TEXT, "gpufleet", "The Kueue cohort of queues that name none.")
    MULTIKUEUE = Setting(FLAG, False, "MultiKueue mode: a tenant's home cluster dispatches jobs to its other "
                         "placements.")
    TOPOLOGY_NAME = Setting(TEXT, "gpu-topology", "Name of KAI's Topology object.")
    TOPOLOGY_LEVELS = Setting(NAMES, (), "Node labels from the widest topology domain to the narrowest; none by "
                              "default.")
    CPU_POOL_INSTANCE_TYPES = Setting(NAMES, ("m7i.large", "m7i.xlarge", "m7i.2xlarge"), "Instance types of a "
                                      "dedicated tenant's CPU NodePool.")
    CPU_POOL_NODE_CLASS = Setting(TEXT, "default", "Karpenter node class of that CPU NodePool.")
    CPU_POOL_CPU_LIMIT = Setting(INT, 16, "CPU limit of that CPU NodePool.")
    BUSINESS_TIMEZONE = Setting(TEXT, "UTC", "Time zone of the SLA tiers' cron pre-warm expressions.")
    MODEL_HUB_FQDNS = Setting(NAMES, ("huggingface.co", "**.huggingface.co", "**.hf.co"), "The only names "
                              "inference endpoints may reach outside the cluster (port 443).")
    KARPENTER_NODE_CLASS_GROUP = Setting(TEXT, "karpenter.k8s.aws", "API group of the Karpenter node class.")
    KARPENTER_NODE_CLASS_KIND = Setting(TEXT, "EC2NodeClass", "Kind of the Karpenter node class.")
    VLLM_IMAGE = Setting(TEXT, "", "vLLM image of inference endpoints (a Django setting only); empty: the "
                         "catalog's.")
    DCGM_NODE_LABEL = Setting(TEXT, "Hostname", "The DCGM label that names the node.", Source.ENV_THEN_DJANGO)

    # --- Billing and metering -----------------------------------------------------------------------------
    BILLING_CURRENCY = Setting(TEXT, "USD", "Currency of invoices (prices may be entered in any supported one).",
                               Source.DJANGO_THEN_ENV)
    CURRENCIES = Setting(NAMES, ("USD", "EUR", "GBP", "CHF", "CAD", "AUD", "SEK", "NOK", "DKK"), "Supported "
                         "currencies; all have two minor digits.", Source.DJANGO_THEN_ENV)
    INVOICE_PREFIX = Setting(TEXT, "GF", "Prefix of invoice numbers (<prefix>-<year>-<counter>).",
                             Source.DJANGO_THEN_ENV)
    BILLING_IDLE_SHARE = Setting(FLAG, False, "Share the fleet's idle GPU-hours among tenants in proportion to "
                                 "use (an extra line).", Source.DJANGO_THEN_ENV)
    RECONCILE_TOLERANCE = Setting(DECIMAL, Decimal("0.05"), "Reconciliation flags a tenant when measured and "
                                  "OpenCost GPU-hours differ by more than this fraction...", Source.DJANGO_THEN_ENV)
    RECONCILE_MIN_GPU_HOURS = Setting(DECIMAL, Decimal("0.5"), "... and by more than this many GPU-hours.",
                                      Source.DJANGO_THEN_ENV)
    OPENCOST_URL = Setting(TEXT, "", "OpenCost API of the billing reconciliation; empty: none.",
                           Source.DJANGO_THEN_ENV)
    SCRAPE_INTERVAL = Setting(INT, 30, "Seconds between the metrics scrapes metering relies on.",
                              Source.DJANGO_THEN_ENV)
    MAX_GAP_SCRAPES = Setting(INT, 3, "Missed scrapes metering tolerates before a gap.", Source.DJANGO_THEN_ENV)
    HAMI_SHARE_RULE = Setting(TEXT, "max", "How a HAMi share's GPU fraction is measured.", Source.DJANGO_THEN_ENV)
    USAGE_METRIC = Setting(TEXT, "DCGM_FI_DEV_FB_USED", "The DCGM metric every attributed GPU and MIG instance "
                           "reports.", Source.DJANGO_THEN_ENV)
    METRICS_CLUSTER_LABEL = Setting(TEXT, "cluster", "The external label that names the cluster when several "
                                    "share one TSDB.", Source.DJANGO_THEN_ENV)
    METERING_CONCURRENCY = Setting(INT, 2, "Range queries in flight while metering writes the rows measured so "
                                   "far.", Source.DJANGO_THEN_ENV)
    COLLECT_LOOKBACK_HOURS = Setting(INT, 3, "Settled hours the hourly collection re-collects each run.",
                                     Source.DJANGO_THEN_ENV)
    BILLING_PROVIDER_NAME = Setting(TEXT, "gpufleet", "FOCUS ProviderName, InvoiceIssuerName and PublisherName.",
                                    Source.DJANGO_THEN_ENV)


SETTINGS = Settings()
_DECLARED: dict[str, Setting[Any]] = {
    value.name: value for value in vars(Settings).values() if isinstance(value, Setting)
}


def declared() -> Iterable[Setting[Any]]:
    """Every declaration, in the order above."""
    return _DECLARED.values()


def setting(name: str) -> Setting[Any]:
    """The declaration of GPUFLEET_<name>; UnknownSetting when there is none."""
    try:
        return _DECLARED[name]
    except KeyError:
        raise UnknownSetting(f"{name} is not a declared setting (gpufleet/core/conf.py)") from None


def get(name: str) -> Any:
    """The current value of the setting named in full (GPUFLEET_...), of its declared type."""
    return setting(name).value()


def environment(name: str) -> Any:
    """The setting's value in the process environment now, None when unset: for the one reader that has
    always looked there rather than at the Django setting computed at startup (node health's metrics URL)."""
    return setting(name).environment()


def __getattr__(attr: str) -> Any:
    # `conf.BILLING_CURRENCY`: module attributes are looked up here only when not found otherwise.
    if attr.startswith("_") or PREFIX + attr not in _DECLARED:
        raise AttributeError(f"gpufleet.core.conf has no setting {attr!r}")
    return _DECLARED[PREFIX + attr].value()


def markdown_table() -> str:
    """The operator guide's settings table (docs/operator-guide.md, "Settings reference")."""
    lines = ["| setting | type | default | read from | what it does |", "| --- | --- | --- | --- | --- |"]
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    for item in declared():
        default = f"`{item.shown()}`" if item.shown() else "(empty)"
        lines.append(f"| `{item.name}` | {item.kind.name} | {cell(default)} | {item.source.value} | {cell(item.doc)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
