"""Inference endpoints: the serving Deployment, its Service and scrape object, and the KEDA ScaledObject.

Where an endpoint lives (issue 15, defect 5). vCluster v0.36.1 syncs pods, not Deployments, to the host:
the chart's `sync.toHost` has pods, services, configMaps, secrets, ingresses, PVCs ... and no
deployments (`chart/values.schema.json` `SyncToHost`, reference vcluster/values.schema.json). A
ScaledObject in `tenant-<slug>` naming a Deployment the tenant created *inside* its virtual cluster
therefore resolves to nothing on the host. Running KEDA inside every vCluster would need KEDA's
operator, its metrics APIService and a Prometheus reachable from each virtual cluster. So the platform
owns the serving Deployment on the host: it is rendered here, in the tenant's host namespace, and the
ScaledObject scales exactly that object (KEDA v2.20 resolves `scaleTargetRef` in the ScaledObject's
own namespace, `pkg/scaling/resolver` / docs `reference/scaledobject-spec.md`).

The trigger is real only if someone scrapes the pods: with `ignoreNullValues` an unscraped metric reads
as 0 and the endpoint would sit at its minimum forever. A VMServiceScrape (VictoriaMetrics operator
v0.74.1, the platform's metrics store behind GPUFLEET_METRICS_URL) selects the endpoint's Service;
the operator's relabelling adds the `namespace` label the queries select on, and vLLM (0.33.0,
reference vllm-metrics.md) labels every engine metric with `model_name` (= --served-model-name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from infra.manifests import Manifest
from scheduling.catalog import rules as catalog
from scheduling.defaults import DEFAULT_PRIORITY_CLASS
from scheduling.inputs import Catalog, EndpointSpec, scheduling_of
from scheduling.nodepools.render import MODE_LABEL
from scheduling.routing import KAI_QUEUE_LABEL, KAI_SCHEDULER
from tenants.isolation.network import SYNCED_MARKER

KEDA = "keda.sh/v1alpha1"
VM_OPERATOR = "operator.victoriametrics.com/v1beta1"
ENDPOINT_LABEL = "gpufleet.io/endpoint"
VLLM_PORT = 8000
# The tenant's GPU LocalQueue (issue 15: named so LocalQueue defaulting does not capture other pods).
GPU_QUEUE = "gpu"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# The WorkloadPriorityClass an endpoint's pods ask for, by SLA tier (scheduling.defaults.PRIORITY_CLASSES),
# never above the tenant's own class (the entitlement its Kyverno policy enforces, scheduling.routing). Without
# one a serving pod's Kueue workload had priority 0 (issue 26 review F12): below every class, so any of the
# tenant's own jobs preempted a critical endpoint (withinClusterQueue: LowerPriority), and so could any tenant
# borrowing in the cohort (borrowWithinCohort.maxPriorityThreshold).
TIER_PRIORITY = {"critical": "high", "standard": "standard", "batch": "low"}
# What vLLM writes at run time, all on emptyDirs because the pod runs as UID 1000 with no home of its own
# (the image's HOME is root's): HOME (triton's ~/.triton, torch's ~/.cache fallbacks), XDG_CACHE_HOME (vLLM's
# VLLM_CACHE_ROOT defaults to $XDG_CACHE_HOME/vllm: compile caches), HF_HOME (model weights) and /tmp.
HOME_DIR = "/home/vllm"
RUN_AS_NAME = "vllm"
CACHE_DIR = "/cache"
# The tenant's Hugging Face token: a file huggingface_hub reads through HF_TOKEN_PATH (gated models). The
# Secret is written by External Secrets from the tenant's own OpenBao path (hf_token_objects), rendered whenever
# a store (OpenBao) is configured. Mounted optional for public models (a tenant without a token still serves);
# required for a gated one (issue 26, F6): its pod waits for the token instead of failing the download, and
# such an endpoint is refused when there is no store (scheduling.actions.create_endpoint).
HF_TOKEN_SECRET = "gpufleet-hf-token"
HF_TOKEN_KEY = "token"
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
HF_TOKEN_REMOTE = "huggingface"  # below the tenant's KV path: <mount>/tenants/<slug>/huggingface, key token
EXTERNAL_SECRETS = "external-secrets.io/v1"
OPENBAO_STORE = "gpufleet-openbao"
# Metrics the triggers read (reference vllm-metrics.md, vLLM 0.33.0).
QUEUE_METRIC = "vllm:num_requests_waiting"
KV_CACHE_METRIC = "vllm:kv_cache_usage_perc"


def object_name(endpoint: EndpointSpec) -> str:
    return f"endpoint-{endpoint.name}"


def selector_labels(endpoint: EndpointSpec) -> dict[str, str]:
    return {ENDPOINT_LABEL: endpoint.name}


def priority_class(tier: str, classes: Iterable[tuple[str, int, str]], ceiling: str) -> str:
    """TIER_PRIORITY's class for the tier (DEFAULT_PRIORITY_CLASS for a tier an admin added) if the tenant may use
    it -- its value not above the tenant's own class `ceiling`, as scheduling.render.allowed_priority_classes
    decides -- else the highest class the tenant may use; "" (no label) when it may use none."""
    values = {name: value for name, value, _ in classes}
    limit = values.get(ceiling, 0)
    wanted = TIER_PRIORITY.get(tier, DEFAULT_PRIORITY_CLASS)
    if values.get(wanted, limit + 1) <= limit:
        return wanted
    allowed = [name for name, value in values.items() if value <= limit]
    return max(allowed, key=lambda name: (values[name], name)) if allowed else ""


def serving_deployment(meta: dict[str, Any], endpoint: EndpointSpec, image: str, *,
                       node_selector: dict[str, str] | None = None,
                       tolerations: list[dict[str, Any]] | None = None, priority: str = "") -> Manifest:
    """vLLM's OpenAI server, one whole GPU per replica. No `replicas`: KEDA's HPA owns the count, and a
    GitOps apply must not fight it. Restricted-PSS compliant so it runs in every trust level's namespace.
    The tenant's placement (dedicated nodes for untrusted tenants) is set here: vCluster enforces it
    only on the pods it syncs, and this one is not synced.

    `priority` (priority_class) labels the pods, not the Deployment: Kueue takes a pod's workload priority from
    the pod's own label (kueue@v0.19.2:pkg/controller/jobframework/reconciler.go:1716-1717, ExtractPriority),
    and its Deployment webhook refuses to add the label to a running Deployment's metadata
    (pkg/controller/jobframework/validation.go:219-225), which an endpoint rendered before would be; a pod
    template change is a rolling update that Kueue admits pod by pod."""
    pod_labels = {**selector_labels(endpoint), "app.kubernetes.io/name": "vllm", QUEUE_LABEL: GPU_QUEUE}
    meta = {**meta, "labels": {**meta["labels"], **pod_labels, "gpufleet.io/deployment": endpoint.deployment}}
    if priority:
        pod_labels[PRIORITY_LABEL] = priority
    # What the tenant's routing policy would set on a whole-GPU pod, set here as well (review N7): the policies
    # and this Deployment are applied in one stage, and Kyverno builds its webhook rules from a new Policy
    # asynchronously, so a first pod could be created before the policy covers it. HAMi's webhook then takes it
    # (it skips only pods naming another scheduler, HAMi@v2.10.0:pkg/scheduler/webhook.go:64-69) and
    # hami-scheduler can never place it on a whole-GPU node. Named here, the pod is right whatever the order.
    pod_labels[KAI_QUEUE_LABEL] = meta["namespace"]
    node_selector = {**(node_selector or {}), MODE_LABEL: catalog.WHOLE}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": selector_labels(endpoint)},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "schedulerName": KAI_SCHEDULER,
                    "nodeSelector": dict(node_selector),
                    **({"tolerations": [dict(t) for t in tolerations]} if tolerations else {}),
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                        "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "vllm",
                        "image": image,
                        "args": ["--model", endpoint.model, "--served-model-name", endpoint.model,
                                 "--port", str(VLLM_PORT)],
                        # USER/LOGNAME: the image has no passwd entry for UID 1000, and Python's getpass.getuser()
                        # (torch's inductor cache name, triton) reads these before it asks the passwd database,
                        # which fails for an unknown UID (review F14).
                        "env": [{"name": "USER", "value": RUN_AS_NAME},
                                {"name": "LOGNAME", "value": RUN_AS_NAME},
                                {"name": "HOME", "value": HOME_DIR},
                                {"name": "XDG_CACHE_HOME", "value": CACHE_DIR},
                                {"name": "HF_HOME", "value": f"{CACHE_DIR}/huggingface"},
                                {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/{HF_TOKEN_KEY}"}],
                        "ports": [{"name": "http", "containerPort": VLLM_PORT}],
                        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"},
                                           "periodSeconds": 10},
                        "resources": {
                            "requests": {"cpu": "4", "memory": "24Gi"},
                            "limits": {"memory": "48Gi", "nvidia.com/gpu": "1"},
                        },
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "home", "mountPath": HOME_DIR},
                                         {"name": "cache", "mountPath": CACHE_DIR},
                                         {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - a mount path, not a temp file
                                         {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True},
                                         {"name": "shm", "mountPath": "/dev/shm"}],  # noqa: S108 - a mount path, not a temp file
                    }],
                    "volumes": [{"name": "home", "emptyDir": {}},
                                {"name": "cache", "emptyDir": {}},
                                {"name": "tmp", "emptyDir": {}},
                                {"name": "hf-token", "secret": {
                                    "secretName": HF_TOKEN_SECRET, "optional": not endpoint.gated,
                                    "items": [{"key": HF_TOKEN_KEY, "path": HF_TOKEN_KEY}]}},
                                {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
                },
            },
        },
    }


def hf_token_objects(metadata_of: Any, slug: str, cat: Catalog) -> list[Manifest]:
    """The tenant's Hugging Face token from OpenBao into HF_TOKEN_SECRET (External Secrets v2.9, vault
    provider, which OpenBao speaks). The SecretStore logs in with Kubernetes auth as the namespace's default
    service account: the tenant's OpenBao role is bound to every service account of its host namespace
    (infra.openbao.ensure_tenant) and its policy reaches only <mount>/tenants/<slug>/. Nothing without OpenBao."""
    if not cat.openbao_addr:
        return []
    store = {"apiVersion": EXTERNAL_SECRETS, "kind": "SecretStore", "metadata": metadata_of(OPENBAO_STORE),
             "spec": {"provider": {"vault": {
                 "server": cat.openbao_addr, "path": cat.openbao_mount, "version": "v2",
                 "auth": {"kubernetes": {"mountPath": cat.openbao_kubernetes_auth, "role": f"gpufleet-tenant-{slug}",
                                         "serviceAccountRef": {"name": "default"}}}}}}}
    secret = {"apiVersion": EXTERNAL_SECRETS, "kind": "ExternalSecret", "metadata": metadata_of(HF_TOKEN_SECRET),
              "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": OPENBAO_STORE, "kind": "SecretStore"},
                       "target": {"name": HF_TOKEN_SECRET, "creationPolicy": "Owner"},
                       "data": [{"secretKey": HF_TOKEN_KEY,
                                 "remoteRef": {"key": f"tenants/{slug}/{HF_TOKEN_REMOTE}",
                                               "property": HF_TOKEN_KEY}}]}}
    return [store, secret]


def model_hub_egress(meta: dict[str, Any], cat: Catalog) -> Manifest:
    """The serving pods may reach the model hub over HTTPS -- and only they, only there. An untrusted tenant
    has no world egress (tenants.isolation.network), so without this vLLM cannot download its model. Names
    resolve through Cilium's DNS proxy (the tenant's gpufleet-dns rule), which toFQDNs needs."""
    names = [{"matchPattern": n} if "*" in n else {"matchName": n} for n in cat.model_hub_fqdns]
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": meta,
            "spec": {"description": "inference endpoints download models from the model hub",
                     # The platform's serving pods only: a pod the tenant's vCluster synced could copy these
                     # labels, but never drops the syncer's own marker (tenants.isolation.network).
                     "endpointSelector": {"matchLabels": {"app.kubernetes.io/name": "vllm"}, "matchExpressions": [
                         {"key": ENDPOINT_LABEL, "operator": "Exists"},
                         {"key": SYNCED_MARKER, "operator": "DoesNotExist"}]},
                     "egress": [{"toFQDNs": names,
                                 "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}]}}


def service(meta: dict[str, Any], endpoint: EndpointSpec) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**meta, "labels": {**meta["labels"], **selector_labels(endpoint)}},
        "spec": {"selector": selector_labels(endpoint),
                 "ports": [{"name": "http", "port": VLLM_PORT, "targetPort": "http", "protocol": "TCP"}]},
    }


def service_scrape(meta: dict[str, Any], endpoint: EndpointSpec) -> Manifest:
    return {
        "apiVersion": VM_OPERATOR,
        "kind": "VMServiceScrape",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": selector_labels(endpoint)},
            "endpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}],
        },
    }


def prometheus_trigger(cat: Catalog, name: str, query: str, threshold: str,
                       metric_type: str = "AverageValue") -> dict[str, Any]:
    return {
        "type": "prometheus",
        "name": name,
        "metricType": metric_type,
        # At zero replicas vLLM exports nothing: an empty result counts as 0 instead of a scaler error.
        # That is only safe because service_scrape() makes the metric exist whenever a replica runs.
        "metadata": {"serverAddress": cat.metrics_url, "query": query, "threshold": threshold,
                     "activationThreshold": "0", "ignoreNullValues": "true"},
    }


def scaled_object(meta: dict[str, Any], namespace: str, cat: Catalog, endpoint: EndpointSpec, *,
                  suspended: bool, quantity: Any) -> Manifest:
    selector = f'namespace="{namespace}",model_name="{endpoint.model}"'
    triggers = [
        # Queue depth: requests waiting for a batch slot, summed over replicas. AverageValue: the HPA
        # wants sum / target replicas (the target is per replica).
        prometheus_trigger(cat, "queue-depth", f"sum({QUEUE_METRIC}{{{selector}}})", str(endpoint.queue_target)),
        # KV-cache use is a 0-1 fraction averaged over replicas; scale out before it is full and
        # requests start preempting. Value: the HPA wants replicas x avg / target (an average must not
        # be divided by the target as if it were a total).
        prometheus_trigger(cat, "kv-cache", f"avg({KV_CACHE_METRIC}{{{selector}}})",
                           quantity(endpoint.kv_cache_target), metric_type="Value"),
    ]
    if endpoint.prewarm_start and endpoint.prewarm_end:
        triggers.append({
            "type": "cron",
            "name": "business-hours-prewarm",
            "metadata": {"timezone": cat.business_timezone, "start": endpoint.prewarm_start,
                         "end": endpoint.prewarm_end, "desiredReplicas": str(endpoint.prewarm_replicas)},
        })
    meta = {**meta, "labels": {**meta["labels"], "gpufleet.io/sla-tier": endpoint.tier}}
    if suspended:
        # KEDA holds the target at 0 replicas while the tenant is suspended.
        meta["annotations"] = {"autoscaling.keda.sh/paused-replicas": "0"}
    return {
        "apiVersion": KEDA,
        "kind": "ScaledObject",
        "metadata": meta,
        "spec": {
            # The platform-owned host Deployment above, in the ScaledObject's namespace.
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": object_name(endpoint)},
            "pollingInterval": endpoint.polling_seconds,
            "cooldownPeriod": endpoint.cooldown_seconds,
            "minReplicaCount": endpoint.min_replicas,
            "maxReplicaCount": endpoint.max_replicas,
            "triggers": triggers,
        },
    }


def replicate_services(view: Any, ctx: Any, values: dict[str, Any]) -> None:
    """vcluster.yaml hook: each endpoint's host Service appears inside the virtual cluster as
    `endpoint-<name>` in `default` (chart `networking.replicateServices.fromHost`, v0.36.1), so the
    tenant's own pods call the platform-owned server by a name of their cluster."""
    sched = scheduling_of(view)
    if sched is None or not sched.endpoints:
        return
    mappings = values.setdefault("networking", {}).setdefault("replicateServices", {}).setdefault("fromHost", [])
    for endpoint in sched.endpoints:
        name = object_name(endpoint)
        mappings.append({"from": f"{view.namespace}/{name}", "to": f"default/{name}"})
