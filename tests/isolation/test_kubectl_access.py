"""kubectl access to an untrusted tenant's virtual cluster works end to end on paper (issue 15, defect 9):
the kubeconfig's server name is routed (Ingress) and certified (SANs) by the vCluster it names, the
control plane -- and only the control plane -- may reach the OIDC issuer, and kubelogin asks for the
scopes whose claims the API server reads."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import yaml

from tenants.isolation import kubeconfig
from tenants.reconcile import desired_manifests
from tests.support import factories

from .helpers import find

pytestmark = pytest.mark.django_db


@pytest.fixture
def gamma(settings):
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test:8443/realms/fleet"
    # The vCluster issuer setting wins over OIDC_OP_ISSUER: these tests mean the sign-in issuer, whatever the
    # process was started with (a CI run once had the demo's reserved issuer there).
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = ""
    settings.GPUFLEET_VCLUSTER_URL_TEMPLATE = "https://{slug}.vc.gpufleet.test"
    return factories.tenant("gamma", "untrusted", phase="ready")


def test_the_kubeconfig_server_is_the_vclusters_ingress_host_and_a_certificate_san(gamma) -> None:
    config = yaml.safe_load(kubeconfig.kubeconfig_yaml(gamma))
    host = urlsplit(config["clusters"][0]["cluster"]["server"]).hostname
    values = find(desired_manifests(gamma), "HelmRelease", "vcluster")["spec"]["values"]
    assert values["controlPlane"]["ingress"] == {"enabled": True, "host": host}
    assert host in values["controlPlane"]["proxy"]["extraSANs"]


def test_only_the_control_plane_reaches_the_issuer(gamma) -> None:
    manifests = desired_manifests(gamma)
    policy = find(manifests, "CiliumNetworkPolicy", "gpufleet-oidc-issuer")["spec"]
    assert policy["endpointSelector"] == {
        "matchLabels": {"app": "vcluster", "release": "vcluster"},
        # Synced tenant pods carry the syncer's marker (and cannot remove it): never selected.
        "matchExpressions": [{"key": "vcluster.loft.sh/managed-by", "operator": "DoesNotExist"}],
    }
    assert policy["egress"] == [{"toFQDNs": [{"matchName": "login.gpufleet.test"}],
                                 "toPorts": [{"ports": [{"port": "8443", "protocol": "TCP"}]}]}]
    # Tenant workloads of an untrusted tenant still have no way out.
    names = {m["metadata"]["name"] for m in manifests if m["kind"] == "CiliumNetworkPolicy"}
    assert "gpufleet-egress" not in names
    world = [m for m in manifests if m["kind"] == "CiliumNetworkPolicy" and m["spec"].get("endpointSelector") == {}
             and any("toFQDNs" in rule or "toEntities" in rule for rule in m["spec"].get("egress", []))]
    assert world == []


def test_kubelogin_asks_for_the_claims_the_api_server_reads(gamma) -> None:
    args = yaml.safe_load(kubeconfig.kubeconfig_yaml(gamma))["users"][0]["user"]["exec"]["args"]
    values = find(desired_manifests(gamma), "HelmRelease", "vcluster")["spec"]["values"]
    flags = values["controlPlane"]["distro"]["k8s"]["apiServer"]["extraArgs"]
    assert "--oidc-username-claim=preferred_username" in flags  # an OIDC `profile` scope claim
    assert "--oidc-groups-claim=groups" in flags
    assert "--oidc-extra-scope=profile" in args and "--oidc-extra-scope=groups" in args
