"""Everything isolation renders, for one tenant of each trust level, validates against the upstream
schemas (strict CRDs, core kinds, the vCluster chart's values schema) and says what it should."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
import yaml

from gpufleet.core import registry as contributors
from infra.schemas import SchemaRegistry
from tenants.isolation import network, nodes
from tenants.isolation.config import TenantIsolationView
from tenants.isolation.policy import DEDICATED_POOL_LABEL
from tests.support.services import need_reference

from .helpers import ctx, find, rendered

LEVELS = ("untrusted", "standard", "trusted")


@pytest.fixture(scope="module")
def registry() -> SchemaRegistry:
    return SchemaRegistry(need_reference())


@pytest.mark.parametrize("level", LEVELS)
def test_everything_validates(registry: SchemaRegistry, level: str) -> None:
    manifests = rendered(level)
    kinds = {m["kind"] for m in manifests}
    assert {"Namespace", "HelmRelease", "Policy", "CiliumNetworkPolicy"} <= kinds
    assert registry.validate(manifests) == []
    # The RBAC objects deployed inside the virtual cluster are core objects: validate them too.
    values = find(manifests, "HelmRelease")["spec"]["values"]
    inner = list(yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"]))
    assert len(inner) == 4
    for obj in inner:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_platform_baseline_validates(registry: SchemaRegistry) -> None:
    baseline = [m for c in contributors.contributions("platform_section") if c.name == "cilium-baseline"
                for m in c.fn(ctx())]
    assert [m["kind"] for m in baseline] == ["CiliumClusterwideNetworkPolicy"]
    assert registry.validate(baseline) == []
    assert baseline[0]["metadata"]["labels"]["gpufleet.io/owner"] == "platform"


def test_strict_schemas_still_catch_a_misspelled_field(registry: SchemaRegistry) -> None:
    cnp = copy.deepcopy(find(rendered("standard"), "CiliumNetworkPolicy", "gpufleet-egress"))
    cnp["spec"]["egress"][0]["toEntitys"] = cnp["spec"]["egress"][0].pop("toEntities")
    assert registry.validate([cnp]), "a typo in a Cilium rule must fail validation"
    policy = copy.deepcopy(find(rendered("standard"), "Policy"))
    policy["spec"]["rules"][0]["validate"]["failureActon"] = "Enforce"
    assert registry.validate([policy])
    release = copy.deepcopy(find(rendered("standard"), "HelmRelease"))
    release["spec"]["values"]["sync"]["toHost"]["pods"]["enforceToleration"] = []
    assert registry.validate([release])


def test_vcluster_trusts_the_platform_issuer_and_maps_roles_to_groups() -> None:
    values = find(rendered("standard"), "HelmRelease")["spec"]["values"]
    args = values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
    assert "--oidc-issuer-url=https://login.gpufleet.test" in args
    assert "--oidc-client-id=vcluster-test" in args
    assert "--oidc-groups-claim=groups" in args
    assert "--oidc-groups-prefix=oidc:" in args
    assert values["experimental"]["syncSettings"]["setOwner"] is False
    assert values["controlPlane"]["statefulSet"]["resources"]["limits"]["memory"]
    bindings = {
        b["subjects"][0]["name"]: b["roleRef"]["name"]
        for b in yaml.safe_load_all(values["experimental"]["deploy"]["vcluster"]["manifests"])
    }
    assert bindings == {
        "oidc:gpufleet:t-standard:owner": "cluster-admin",
        "oidc:gpufleet:t-standard:admin": "cluster-admin",
        "oidc:gpufleet:t-standard:member": "edit",
        "oidc:gpufleet:t-standard:viewer": "view",
    }


def test_untrusted_pods_are_pinned_to_a_dedicated_pool() -> None:
    values = find(rendered("untrusted"), "HelmRelease")["spec"]["values"]
    assert values["sync"]["toHost"]["pods"]["enforceTolerations"] == [f"{DEDICATED_POOL_LABEL}=t-untrusted:NoSchedule"]
    assert values["sync"]["fromHost"]["nodes"]["selector"]["labels"] == {DEDICATED_POOL_LABEL: "t-untrusted"}
    for level in ("standard", "trusted"):
        values = find(rendered(level), "HelmRelease")["spec"]["values"]
        assert "enforceTolerations" not in values["sync"]["toHost"]["pods"]
        assert "fromHost" not in values["sync"]


def test_network_policies_isolate_tenants() -> None:
    manifests = rendered("standard")
    iso = find(manifests, "CiliumNetworkPolicy", "gpufleet-tenant-isolation")["spec"]
    assert iso["enableDefaultDeny"] == {"ingress": True, "egress": True}
    deny = iso["ingressDeny"][0]["fromEndpoints"][0]["matchExpressions"]
    assert {"key": network.NAMESPACE_KEY, "operator": "NotIn", "values": ["tenant-t-standard"]} in deny
    dns = find(manifests, "CiliumNetworkPolicy", "gpufleet-dns")["spec"]["egress"][0]
    assert dns["toEndpoints"][0]["matchLabels"]["k8s:k8s-app"] == "kube-dns"
    api = find(manifests, "CiliumNetworkPolicy", "gpufleet-vcluster-api")["spec"]["ingress"][0]
    assert api["fromEndpoints"][0]["matchLabels"][network.NAMESPACE_KEY] == "ingress-nginx"
    apiserver = find(manifests, "CiliumNetworkPolicy", "gpufleet-kube-apiserver")["spec"]["egress"][0]
    assert apiserver == {"toEntities": ["kube-apiserver"]}
    scrape = find(manifests, "CiliumNetworkPolicy", "gpufleet-monitoring")["spec"]["ingress"][0]
    assert scrape["fromEndpoints"][0]["matchLabels"] == {network.NAMESPACE_KEY: "monitoring"}


def test_untrusted_has_no_world_egress_unless_an_admin_allows_it(registry: SchemaRegistry) -> None:
    names = {m["metadata"]["name"] for m in rendered("untrusted") if m["kind"] == "CiliumNetworkPolicy"}
    assert "gpufleet-egress" not in names
    assert find(rendered("trusted"), "CiliumNetworkPolicy", "gpufleet-egress")["spec"]["egress"] == [
        {"toEntities": ["world"]}
    ]
    iso = TenantIsolationView(allowed_modes=frozenset({"whole"}), world_egress=False,
                              egress_cidrs=("10.20.0.0/16",), egress_fqdns=("*.huggingface.co", "pypi.org"))
    manifests = rendered("untrusted", isolation=iso)
    egress = find(manifests, "CiliumNetworkPolicy", "gpufleet-egress")["spec"]["egress"]
    assert egress == [
        {"toCIDRSet": [{"cidr": "10.20.0.0/16"}]},
        {"toFQDNs": [{"matchPattern": "*.huggingface.co"}, {"matchName": "pypi.org"}]},
    ]
    assert registry.validate(manifests) == []


def test_no_issuer_means_no_oidc_flags_never_a_made_up_one(registry: SchemaRegistry) -> None:
    from tenants.isolation.config import IsolationSettings
    from tenants.render import RenderContext, render_tenant

    from .helpers import view

    manifests = render_tenant(view("standard"), RenderContext(extra={"isolation": IsolationSettings()}))
    values = find(manifests, "HelmRelease")["spec"]["values"]
    assert "apiServer" not in values["controlPlane"]["distro"]["k8s"]
    assert registry.validate(manifests) == []


@pytest.mark.parametrize("level", LEVELS)
def test_node_isolation_policy_validates_and_names_the_tenants_own_nodes(registry: SchemaRegistry,
                                                                         level: str) -> None:
    """Review 2, N3: every tenant namespace gets the node-isolation Policy (Enforce); only the
    untrusted tenant, which has dedicated nodes, may carry its own dedicated toleration and selector."""
    policy = find(rendered(level), "Policy", nodes.POLICY_NAME)
    assert registry.validate([policy]) == []
    rules = {r["name"]: r for r in policy["spec"]["rules"]}
    assert set(rules) == {"no-foreign-dedicated-tolerations", "no-foreign-dedicated-nodes",
                          "gpu-nodes-need-a-gpu-request", "no-gpu-device-env", "no-node-name"}
    node_choices = {"no-foreign-dedicated-tolerations", "no-foreign-dedicated-nodes", "gpu-nodes-need-a-gpu-request"}
    for name, rule in rules.items():
        # Node choices can be added to an existing pod by UPDATE (tolerations; selectors on gated pods).
        operations = ["CREATE", "UPDATE"] if name in node_choices else ["CREATE"]
        assert rule["match"]["any"][0]["resources"] == {"kinds": ["Pod"], "operations": operations}
        assert rule["validate"]["failureAction"] == "Enforce"
    message = rules["no-foreign-dedicated-tolerations"]["validate"]["message"]
    slug = f"t-{level}"
    expected = f"only {DEDICATED_POOL_LABEL}={slug}" if level == "untrusted" else "(allowed: none)"
    assert f"tenant {slug} may not tolerate" in message and expected in message
