"""An inference endpoint's vLLM pod can actually start (issue 26): writable HOME and caches for a non-root
user, the tenant's Hugging Face token as a file, and a way to the model hub for a tenant without internet."""

from __future__ import annotations

import re

import pytest

from scheduling import actions
from scheduling.endpoints.render import HF_TOKEN_SECRET
from tenants.backends import get_schema_registry
from tenants.reconcile import desired_manifests
from tests.support.services import need_reference

pytestmark = pytest.mark.django_db

# Where vLLM 0.33 / huggingface_hub / torch write at start-up, by the variable that moves each.
WRITTEN = ("HOME", "XDG_CACHE_HOME", "HF_HOME", "TMPDIR")
# The hub's own name and the names it redirects downloads to (LFS CDN, Xet storage).
HUB_HOSTS = ("huggingface.co", "cdn-lfs.huggingface.co", "cdn-lfs-us-1.hf.co", "cas-bridge.xethub.hf.co")


def by_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m["kind"] == kind]


def serving(tenant) -> tuple[list[dict], dict]:  # type: ignore[no-untyped-def]
    actions.create_endpoint(tenant, "chat", model="meta-llama/Llama-3.1-8B-Instruct", tier="critical")
    manifests = desired_manifests(tenant)
    return manifests, next(m for m in by_kind(manifests, "Deployment") if m["metadata"]["name"] == "endpoint-chat")


def mounted(pod: dict, path: str) -> dict | None:
    """The volume under `path` (longest mount prefix), as the kubelet resolves it."""
    container = pod["containers"][0]
    best = max((m for m in container["volumeMounts"] if path == m["mountPath"] or path.startswith(
        m["mountPath"].rstrip("/") + "/")), key=lambda m: len(m["mountPath"]), default=None)
    if best is None:
        return None
    return next(v for v in pod["volumes"] if v["name"] == best["name"]) | {"readOnly": best.get("readOnly", False)}


def test_every_path_vllm_writes_is_a_writable_volume(fleet, tenants) -> None:
    _, deployment = serving(tenants["untrusted"])
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    for name in WRITTEN:
        path = env.get(name, "/tmp")  # TMPDIR unset means /tmp
        volume = mounted(pod, path)
        assert volume is not None and "emptyDir" in volume and not volume["readOnly"], f"{name}={path}"


def test_the_hf_token_is_a_file_from_the_tenants_openbao_path(fleet, tenants, settings) -> None:
    settings.GPUFLEET_OPENBAO_ADDR = "https://openbao.example:8200"
    manifests, deployment = serving(tenants["trusted"])
    pod = deployment["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    token = mounted(pod, env["HF_TOKEN_PATH"])  # huggingface_hub reads the token from this file
    assert token is not None and token["secret"]["secretName"] == HF_TOKEN_SECRET and token["readOnly"]
    assert token["secret"]["optional"] is True  # public models need no token
    external = next(m for m in by_kind(manifests, "ExternalSecret"))
    assert external["spec"]["target"]["name"] == HF_TOKEN_SECRET
    assert external["spec"]["data"][0]["remoteRef"]["key"].startswith("tenants/t-trusted/")
    store = next(m for m in by_kind(manifests, "SecretStore"))
    vault = store["spec"]["provider"]["vault"]
    assert vault["server"] == "https://openbao.example:8200" and vault["version"] == "v2"
    assert vault["auth"]["kubernetes"]["role"] == "gpufleet-tenant-t-trusted"  # infra.openbao's role name
    need_reference()
    assert get_schema_registry().validate([store, external]) == []


def test_no_secret_store_without_openbao(fleet, tenants, settings) -> None:
    settings.GPUFLEET_OPENBAO_ADDR = ""
    manifests, _ = serving(tenants["trusted"])
    # The vCluster's serving CA has an ExternalSecret of its own (issue 26 B6); the endpoints' token has none.
    endpoint_secrets = [m for m in by_kind(manifests, "ExternalSecret")
                        if m["metadata"]["name"] != "vcluster-certs"]
    assert not endpoint_secrets and not by_kind(manifests, "SecretStore")


def cilium_fqdn_match(selector: dict, name: str) -> bool:
    """toFQDNs matchName / matchPattern as the CiliumNetworkPolicy CRD (cilium v1.19.4, reference crds/cilium/
    ciliumnetworkpolicies.yaml:444-470) defines them: `**.` any number of subdomain levels, `*` any DNS
    characters but '.', except a leading `*` not followed by '.' also matching subdomains."""
    if "matchName" in selector:
        return name.rstrip(".").lower() == selector["matchName"].rstrip(".").lower()
    pattern = selector["matchPattern"].rstrip(".").lower()
    if pattern == "*":
        return True
    if pattern.startswith("**."):
        return name.lower().endswith("." + pattern[3:])
    regex = re.escape(pattern).replace(r"\*", "[-a-z0-9_]*")
    return re.fullmatch(regex, name.lower()) is not None


def selects(selector: dict, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        value = labels.get(e["key"])
        ok = {"Exists": value is not None, "DoesNotExist": value is None,
              "In": value in e.get("values", []), "NotIn": value not in e.get("values", [])}[e["operator"]]
        if not ok:
            return False
    return True


def egress_allows(policies: list[dict], labels: dict[str, str], host: str, port: str) -> bool:
    for policy in policies:
        if not selects(policy["spec"]["endpointSelector"], labels):
            continue
        for rule in policy["spec"].get("egress", []):
            if rule.get("toEntities") == ["world"]:
                return True
            ports = [p["port"] for tp in rule.get("toPorts", []) for p in tp["ports"]] or [port]
            if port in ports and any(cilium_fqdn_match(s, host) for s in rule.get("toFQDNs", [])):
                return True
    return False


def test_an_untrusted_tenants_endpoint_reaches_the_model_hub_and_nothing_else(fleet, tenants) -> None:
    manifests, deployment = serving(tenants["untrusted"])
    policies = by_kind(manifests, "CiliumNetworkPolicy")
    serving_pod = deployment["spec"]["template"]["metadata"]["labels"]
    for host in HUB_HOSTS:
        assert egress_allows(policies, serving_pod, host, "443"), host
    assert not egress_allows(policies, serving_pod, "example.com", "443")
    # A pod the tenant's vCluster synced, copying the serving labels, gets none of it.
    forged = {**serving_pod, "vcluster.loft.sh/managed-by": "vcluster"}
    assert not egress_allows(policies, forged, "huggingface.co", "443")
    need_reference()
    assert get_schema_registry().validate(policies) == []


def test_the_vllm_user_has_a_name_without_a_passwd_entry(fleet, tenants) -> None:
    """Review F14: UID 1000 has no passwd entry in the image; getpass.getuser() (torch's inductor cache, triton)
    reads LOGNAME/USER before the passwd database (CPython Lib/getpass.py), so both are set."""
    _, deployment = serving(tenants["standard"])
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["USER"] == env["LOGNAME"] == "vllm"


def allowed_classes(manifests: list[dict]) -> list[str]:
    """What the tenant's Kyverno priority policy admits (scheduling.routing.priority_policy)."""
    policy = next(m for m in by_kind(manifests, "Policy") if m["metadata"]["name"] == "gpufleet-priority-classes")
    return policy["spec"]["rules"][0]["validate"]["deny"]["conditions"]["any"][0]["value"]


@pytest.mark.parametrize("tier, tenant_class, expected", [
    ("critical", "high", "high"),
    ("critical", "standard", "standard"),  # never above the tenant's entitlement
    ("standard", "high", "standard"),
    ("batch", "standard", "low"),
])
def test_an_endpoints_pods_carry_the_priority_of_its_tier(fleet, tenants, tier, tenant_class, expected) -> None:
    """Review F12: a critical endpoint's pods were at priority 0, below every WorkloadPriorityClass. The label is on
    the pod template only: Kueue reads it there (ExtractPriority) and refuses to add it to a running Deployment."""
    tenant = tenants["trusted"]
    actions.set_tenant_scheduling(tenant, priority_class=tenant_class)
    actions.create_endpoint(tenant, "chat", model="meta-llama/Llama-3.1-8B-Instruct", tier=tier)
    manifests = desired_manifests(tenant)
    deployment = next(m for m in by_kind(manifests, "Deployment") if m["metadata"]["name"] == "endpoint-chat")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/priority-class"] == expected
    assert expected in allowed_classes(manifests)  # the tenant's own admission policy lets the pods in
    assert "kueue.x-k8s.io/priority-class" not in deployment["metadata"]["labels"]


def test_an_unknown_tier_or_class_falls_back_to_what_exists() -> None:
    from scheduling.endpoints.render import priority_class

    classes = [("low", 100, ""), ("standard", 500, ""), ("high", 1000, "")]
    assert priority_class("overnight", classes, "high") == "standard"  # an admin's tier: the default class
    assert priority_class("critical", [("low", 100, ""), ("gold", 900, "")], "gold") == "gold"  # no "high" row
    assert priority_class("critical", [], "") == ""  # nothing to name: no label
    assert priority_class("critical", classes, "deleted") == ""  # the tenant's class is gone: it may use none


# --- F6 (issue 26 review): gated models need the token, and a store to read it from ------------------------


def test_a_gated_model_mounts_the_token_as_required_and_reads_it_from_the_store(fleet, tenants, settings) -> None:
    settings.GPUFLEET_OPENBAO_ADDR = "https://openbao.example:8200"
    tenant = tenants["standard"]
    actions.create_endpoint(tenant, "llama", model="meta-llama/Llama-3.1-8B-Instruct", tier="standard", gated=True)
    actions.create_endpoint(tenant, "public", model="Qwen/Qwen2.5-7B-Instruct", tier="standard")
    manifests = desired_manifests(tenant)
    deployments = {m["metadata"]["name"]: m["spec"]["template"]["spec"] for m in by_kind(manifests, "Deployment")}
    gated = mounted(deployments["endpoint-llama"], "/var/run/secrets/huggingface/token")
    public = mounted(deployments["endpoint-public"], "/var/run/secrets/huggingface/token")
    # The gated model's pod waits for the token Secret; the public one starts without it.
    assert gated["secret"]["optional"] is False and public["secret"]["optional"] is True
    external = [m for m in by_kind(manifests, "ExternalSecret") if m["metadata"]["name"] == HF_TOKEN_SECRET]
    assert len(external) == 1 and by_kind(manifests, "SecretStore")


def test_a_gated_model_without_a_secret_store_is_a_400_naming_the_field(fleet, tenants, settings) -> None:
    from django.core.management import CommandError, call_command
    from rest_framework.test import APIClient

    from scheduling.models import InferenceEndpoint
    from tests.support import factories

    settings.GPUFLEET_OPENBAO_ADDR = ""
    owner = factories.user("owner")
    tenant = factories.tenant("gated", "trusted", owner=owner, phase="ready")
    api = APIClient()
    api.force_authenticate(owner)
    body = {"tenant": tenant.slug, "name": "llama", "model": "meta-llama/Llama-3.1-8B-Instruct", "tier": "standard"}
    refused = api.post("/api/v1/endpoints/", {**body, "gated": True}, format="json")
    assert refused.status_code == 400, refused.content
    assert [e["field"] for e in refused.json()["errors"]] == ["gated"]
    assert "GPUFLEET_OPENBAO_ADDR" in refused.json()["errors"][0]["reason"]
    assert api.post("/api/v1/endpoints/", {**body, "gated": "yes"}, format="json").status_code == 400
    with pytest.raises(CommandError, match="gated"):
        call_command("endpoint", "create", "gated", "llama", "--model", "m", "--tier", "standard", "--gated")
    assert not InferenceEndpoint.objects.exists()
    created = api.post("/api/v1/endpoints/", body, format="json")  # a public model needs no store
    assert created.status_code == 201 and created.json()["gated"] is False


def test_an_endpoint_pod_is_routed_without_waiting_for_kyverno(fleet, tenants) -> None:
    """Review N7: the routing policy and the endpoint's Deployment are applied in one stage, and Kyverno picks up
    a new Policy asynchronously. The pod template therefore carries what the policy would set on a whole-GPU
    pod -- KAI's scheduler (which keeps HAMi's webhook away), the tenant's KAI queue, the whole-GPU mode -- so a
    pod created before the policy covers it is placed the same way."""
    _, deployment = serving(tenants["trusted"])
    template = deployment["spec"]["template"]
    namespace = deployment["metadata"]["namespace"]
    assert template["spec"]["schedulerName"] == "kai-scheduler"
    assert template["spec"]["nodeSelector"]["gpufleet.io/gpu-mode"] == "whole"
    assert template["metadata"]["labels"]["kai.scheduler/queue"] == namespace
    assert template["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
