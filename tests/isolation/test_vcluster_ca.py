"""Issue 26 B6: the real kubectl, with the kubeconfig the platform hands out, verifies a TLS server that presents
the serving certificate a vCluster signs with the CA the platform issued for it -- and refuses any other.

The chain, end to end with a real OpenBao: the reconcile's secrets step issues the CA into OpenBao
(tenants.secrets.ensure_vcluster_ca); the tenant's ExternalSecret names exactly that OpenBao entry (what External
Secrets copies into the Secret the chart mounts); the vCluster signs its serving certificate from it as vcluster
v0.36.1 pkg/server/cert/cert.go:31-149 does (CN kube-apiserver, the in-cluster names, 127.0.0.1 and the chart's
controlPlane.proxy.extraSANs; served as leaf + CA, cert.go:148) -- this test plays that part --; the kubeconfig
carries the CA read back from OpenBao. Only the user entry is swapped for a token, since no OIDC login happens
here; the cluster entry (server name, certificate-authority-data) is used exactly as issued.
"""

from __future__ import annotations

import base64
import http.server
import ipaddress
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from infra import pki
from infra.openbao import OpenBao
from tenants import secrets as tenant_secrets
from tenants.isolation import kubeconfig
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tests.secrets.conftest import BaoServer, bao_server  # noqa: F401 - the real OpenBao, shared
from tests.support import factories
from tests.support.clock import pinned
from tests.support.services import free_port, need_binary

from .helpers import find

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def openbao(settings, bao_server: BaoServer) -> OpenBao:  # noqa: F811
    settings.GPUFLEET_OPENBAO_ADDR = bao_server.addr
    settings.GPUFLEET_OPENBAO_TOKEN = bao_server.root_token
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    settings.GPUFLEET_VCLUSTER_URL_TEMPLATE = "https://{slug}.vc.gpufleet.test"
    settings.GPUFLEET_VCLUSTER_CA_STORE = "gpufleet-openbao"
    return OpenBao.connect(bao_server.addr, token=bao_server.root_token)


def issued(slug: str) -> tuple[object, dict]:
    tenant = factories.tenant(slug, "untrusted", phase=Phase.READY)
    status, _, message = tenant_secrets.ensure(slug)
    assert status == "True" and "vCluster serving CA issued into OpenBao" in message
    return tenant, yaml.safe_load(kubeconfig.kubeconfig_yaml(tenant))


def vcluster_serving_cert(ca_pem: str, ca_key_pem: str, sans: list[str], tmp: Path) -> tuple[Path, Path]:
    """What vCluster's GenAPIServerServingCerts signs (cert.go:51-75, 138-148); chain and key files."""
    ca = x509.load_pem_x509_certificate(ca_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    dns = ["kubernetes.default.svc.cluster.local", "kubernetes.default.svc", "kubernetes.default", "kubernetes",
           "localhost", *sans]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(datetime.now(UTC) - timedelta(hours=1))  # the TLS handshake checks the real clock
        .not_valid_after(datetime.now(UTC) + timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain, key_file = tmp / "serving.crt", tmp / "serving.key"
    chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return chain, key_file


@contextmanager
def https_server(chain: Path, key: Path) -> Iterator[int]:
    """A tiny API server: GET /version answers like kube-apiserver."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"major": "1", "minor": "33", "gitVersion": "v1.33.0"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(chain), str(key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def kubectl_version(config: dict, port: int, tmp: Path) -> subprocess.CompletedProcess:
    """`kubectl get --raw /version` with the issued cluster entry; the server name is the kubeconfig's host,
    dialled at 127.0.0.1 (no DNS here)."""
    binary = need_binary(str(Path(sys.executable).parent / "kubectl"), "kubectl")
    config = {**config, "users": [{"name": config["users"][0]["name"], "user": {"token": "not-checked"}}]}
    path = tmp / "kubeconfig.yaml"
    path.write_text(yaml.safe_dump(config))
    host = urlsplit(config["clusters"][0]["cluster"]["server"]).hostname
    return subprocess.run(
        [binary, "--kubeconfig", str(path), f"--server=https://127.0.0.1:{port}", f"--tls-server-name={host}",
         "--request-timeout=20s", "get", "--raw", "/version"],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp)})


def test_kubectl_verifies_the_vcluster_with_the_ca_the_platform_issued(openbao: OpenBao, tmp_path: Path) -> None:
    tenant, config = issued("ca-acme")
    manifests = desired_manifests(tenant)
    values = find(manifests, "HelmRelease", "vcluster")["spec"]["values"]
    external = find(manifests, "ExternalSecret", "vcluster-certs")["spec"]
    # What External Secrets copies from OpenBao: the entry the secrets step wrote, as vCluster's own CA files.
    remote = {d["secretKey"]: d["remoteRef"] for d in external["data"]}
    assert set(remote) == {"ca.crt", "ca.key"}
    stored = openbao.client.secrets.kv.v2.read_secret_version(
        path=remote["ca.crt"]["key"], mount_point=openbao.mount, raise_on_deleted_version=True)["data"]["data"]
    ca_pem, ca_key = stored[remote["ca.crt"]["property"]], stored[remote["ca.key"]["property"]]
    # Into the Secret vCluster keeps its PKI in (`<release>-certs`, vcluster@v0.36.1 pkg/certs/ensure.go:316),
    # written once (vCluster adds its generated certificates to it); vCluster's own CA path is left at /data/pki,
    # the only one it generates certificates for (pkg/setup/initialize.go:58-60).
    assert external["target"]["name"] == "vcluster-certs" and external["refreshInterval"] == "0s"
    assert "virtualClusterKubeConfig" not in values.get("experimental", {})
    assert base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode() == ca_pem

    chain, key = vcluster_serving_cert(ca_pem, ca_key, values["controlPlane"]["proxy"]["extraSANs"], tmp_path)
    with https_server(chain, key) as port:
        done = kubectl_version(config, port, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gitVersion"] == "v1.33.0"


def test_a_certificate_from_another_ca_is_refused(openbao: OpenBao, tmp_path: Path) -> None:
    tenant, config = issued("ca-beta")
    other_ca, other_key = pki.new_ca("someone else", NOW)
    sans = find(desired_manifests(tenant), "HelmRelease", "vcluster")["spec"]["values"]["controlPlane"]["proxy"][
        "extraSANs"]
    chain, key = vcluster_serving_cert(other_ca, other_key, sans, tmp_path)
    with https_server(chain, key) as port:
        done = kubectl_version(config, port, tmp_path)
    assert done.returncode != 0
    assert "x509: certificate signed by unknown authority" in done.stderr


def test_one_tenants_kubeconfig_does_not_trust_another_vcluster(openbao: OpenBao, tmp_path: Path) -> None:
    """One CA per vCluster: gamma's kubeconfig refuses delta's server, even for gamma's own host name."""
    _, gamma = issued("ca-gamma")
    issued("ca-delta")
    delta = openbao.read_vcluster_ca("ca-delta")
    chain, key = vcluster_serving_cert(delta["tls.crt"], delta["tls.key"], ["ca-gamma.vc.gpufleet.test"], tmp_path)
    with https_server(chain, key) as port:
        done = kubectl_version(gamma, port, tmp_path)
    assert "x509: certificate signed by unknown authority" in done.stderr


def test_the_ca_is_issued_once_and_renewed_before_it_expires(openbao: OpenBao) -> None:
    factories.tenant("ca-once", "standard", phase=Phase.READY)
    with pinned(NOW):
        tenant_secrets.ensure("ca-once")
        first = openbao.read_vcluster_ca("ca-once")
        assert "vCluster serving CA in OpenBao" in tenant_secrets.ensure("ca-once")[2]
    assert openbao.read_vcluster_ca("ca-once") == first  # kubeconfigs already handed out keep verifying
    assert not pki.needs_renewal(first["tls.crt"], NOW)
    assert pki.needs_renewal(first["tls.crt"], NOW + pki.CA_LIFETIME - pki.RENEW_BEFORE)
    with pinned(NOW + pki.CA_LIFETIME - pki.RENEW_BEFORE):
        assert "renewed" in tenant_secrets.ensure("ca-once")[2]
    assert openbao.read_vcluster_ca("ca-once")["tls.crt"] != first["tls.crt"]


def test_openbao_down_is_a_clear_conflict_not_a_kubeconfig_without_its_ca(settings) -> None:
    from gpufleet.core.errors import Conflict

    settings.GPUFLEET_OPENBAO_ADDR = f"http://127.0.0.1:{free_port()}"  # nothing listens
    settings.GPUFLEET_OPENBAO_TOKEN = "t"
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    tenant = factories.tenant("ca-down", "standard", phase=Phase.READY)
    with pytest.raises(Conflict, match="cannot be read from OpenBao now"):
        kubeconfig.kubeconfig_yaml(tenant)


def test_every_placements_vcluster_gets_the_tenant_ca_and_its_context_verifies(openbao: OpenBao, tmp_path) -> None:
    """A tenant on two clusters runs a vCluster on each (tenants.render.render_placed): each tree carries the
    ExternalSecret that seeds its vCluster's PKI Secret with the tenant's CA, and each context of the
    kubeconfig verifies the vCluster it names, signed for that placement's own host."""
    from scheduling.clusters.models import Cluster, Placement
    from tenants.isolation.kubeconfig import context_name
    from tenants.reconcile import tenant_view
    from tenants.render import RenderContext, render_placed

    tenant, config = issued("ca-multi")
    Placement.objects.create(tenant=tenant, cluster=Cluster.objects.create(name="edge", trust_levels=[]), home=False)
    config = yaml.safe_load(kubeconfig.kubeconfig_yaml(tenant))
    entries = {c["name"]: c["cluster"] for c in config["clusters"]}
    stored = openbao.read_vcluster_ca("ca-multi")
    rendered = [(p, ms) for p, ms in render_placed(tenant_view(tenant), RenderContext.from_settings()) if ms]
    assert len(rendered) == 2, [p for p, _ in rendered]
    hosts = set()
    for place, manifests in rendered:
        values = find(manifests, "HelmRelease", "vcluster")["spec"]["values"]
        external = find(manifests, "ExternalSecret", "vcluster-certs")["spec"]
        assert external["target"]["name"] == "vcluster-certs"  # each vCluster's own PKI Secret, seeded
        entry = entries[context_name("ca-multi", "" if place.home else place.cluster)]
        host = urlsplit(entry["server"]).hostname
        assert host in values["controlPlane"]["proxy"]["extraSANs"]
        hosts.add(host)
        chain, key = vcluster_serving_cert(stored["tls.crt"], stored["tls.key"],
                                           values["controlPlane"]["proxy"]["extraSANs"], tmp_path)
        one = {**config, "clusters": [{"name": "c", "cluster": entry}],
               "contexts": [{"name": "c", "context": {"cluster": "c", "user": config["users"][0]["name"]}}],
               "current-context": "c"}
        with https_server(chain, key) as port:
            done = kubectl_version(one, port, tmp_path)
        assert done.returncode == 0, done.stderr
    assert len(hosts) == 2  # two vClusters, two routed names, one tenant CA


def test_the_control_plane_waits_for_the_seeded_ca_secret(openbao: OpenBao) -> None:
    """Review N4: nothing else orders the ExternalSecret before the vCluster, so the control plane mounts the
    seeded Secret as a required volume: the kubelet holds the pod until External Secrets wrote it, and vCluster
    never starts with (and keeps) a CA of its own. The values stay valid for the chart (v0.36.1 schema)."""
    from tenants.backends import get_schema_registry
    from tenants.reconcile import tenant_view
    from tenants.render import RenderContext, render_placed

    tenant, _ = issued("ca-wait")
    [(_, manifests)] = [(p, ms) for p, ms in render_placed(tenant_view(tenant), RenderContext.from_settings()) if ms]
    persistence = find(manifests, "HelmRelease", "vcluster")["spec"]["values"]["controlPlane"]["statefulSet"][
        "persistence"]
    [volume] = [v for v in persistence["addVolumes"] if v["name"] == "gpufleet-ca-seed"]
    assert volume["secret"]["secretName"] == find(manifests, "ExternalSecret", "vcluster-certs")["spec"]["target"][
        "name"] == "vcluster-certs"
    assert volume["secret"]["optional"] is False  # the pod waits for the Secret instead of starting without it
    [mount] = [m for m in persistence["addVolumeMounts"] if m["name"] == "gpufleet-ca-seed"]
    assert mount["readOnly"] and not mount["mountPath"].startswith("/data")  # never in vCluster's own PKI path
    assert get_schema_registry().validate(manifests) == []


# --- F2: outside the demo, no kubeconfig without its CA ------------------------------------------------------


@pytest.fixture
def require_ca(settings) -> None:
    """What every profile but the test one has (base default on; production pins it)."""
    settings.GPUFLEET_KUBECONFIG_REQUIRE_CA = True
    settings.OIDC_OP_ISSUER = "https://login.gpufleet.test"
    settings.GPUFLEET_VCLUSTER_CA_BUNDLE = ""


def test_without_the_openbao_ca_store_the_kubeconfig_is_refused_naming_the_setting(api, settings, require_ca) -> None:
    from django.core.management import CommandError, call_command

    settings.GPUFLEET_OPENBAO_ADDR = ""
    alice = factories.user("alice")
    tenant = factories.tenant("ca-none", "standard", owner=alice, phase=Phase.READY)
    api.force_authenticate(alice)
    response = api.get(f"/api/v1/tenants/{tenant.pk}/kubeconfig/")
    assert response.status_code == 409, response.content
    reason = response.json()["errors"][0]["reason"]
    assert "GPUFLEET_OPENBAO_ADDR is not set" in reason and "OpenBao CA store" in reason
    assert "certificate-authority" not in response.content.decode()
    with pytest.raises(CommandError, match="GPUFLEET_OPENBAO_ADDR"):
        call_command("kubeconfig", "--tenant", "ca-none")
    settings.GPUFLEET_VCLUSTER_CA_STORE = ""
    response = api.get(f"/api/v1/tenants/{tenant.pk}/kubeconfig/")
    assert response.status_code == 409 and "GPUFLEET_VCLUSTER_CA_STORE is empty" in str(response.json())


def test_a_ca_not_issued_yet_is_refused_and_an_operator_bundle_is_accepted(openbao, settings, require_ca,
                                                                         tmp_path: Path) -> None:
    from gpufleet.core.errors import Conflict

    tenant = factories.tenant("ca-later", "standard", phase=Phase.READY)  # no reconcile yet: nothing issued
    with pytest.raises(Conflict, match="not issued yet: the tenant's next reconcile issues it"):
        kubeconfig.kubeconfig_yaml(tenant)
    settings.GPUFLEET_OPENBAO_ADDR = ""
    bundle = tmp_path / "ca.pem"
    bundle.write_text(pki.new_ca("operator bundle", NOW)[0])
    settings.GPUFLEET_VCLUSTER_CA_BUNDLE = str(bundle)
    config = yaml.safe_load(kubeconfig.kubeconfig_yaml(tenant))
    assert base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode() == \
        bundle.read_text()
