"""The production profile refuses to start without its secrets, naming the missing variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.services import REPO

BASE_ENV = {
    "SECRET_KEY": "x" * 50,
    "ALLOWED_HOSTS": "gpufleet.example.com",
    "OIDC_OP_ISSUER": "https://idp.example.com",
    "OIDC_RP_CLIENT_ID": "gpufleet",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.gpu.corp.internal",
}


def load(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in BASE_ENV}
    clean.update(env, DJANGO_SETTINGS_MODULE="gpufleet.settings.production",
                 PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    # Endpoints are lazy (discovered at first use): printing whether it is lazy contacts no provider.
    code = ("import django; django.setup(); from django.conf import settings; "
            "from django.utils.functional import Promise; e = settings.OIDC_OP_TOKEN_ENDPOINT; "
            "print('discovered-lazily' if isinstance(e, Promise) else e)")
    return subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, cwd=REPO)


def test_production_starts_with_everything_set():
    result = load(BASE_ENV)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "discovered-lazily"  # no guessed path: from the discovery document
    override = load({**BASE_ENV, "OIDC_OP_TOKEN_ENDPOINT": "https://idp.example.com/oauth/token"})
    assert override.stdout.strip() == "https://idp.example.com/oauth/token"


@pytest.mark.parametrize("template", ["", "https://vcluster.corp.internal", "http://{slug}.vc.corp.internal",
                                      "{slug}.vc.corp.internal"])
def test_production_requires_a_real_vcluster_url_template(template: str) -> None:
    result = load({**BASE_ENV, "GPUFLEET_VCLUSTER_URL_TEMPLATE": template})
    assert result.returncode != 0 and "GPUFLEET_VCLUSTER_URL_TEMPLATE" in result.stderr


def test_production_serves_the_portal_stylesheet():
    code = (
        "import django; django.setup(); from django.test import Client; "
        "r = Client().get('/static/portal/portal.css', HTTP_HOST='gpufleet.example.com'); "
        "print(r.status_code, r.headers.get('Content-Type'))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in BASE_ENV}
    clean.update(BASE_ENV, DJANGO_SETTINGS_MODULE="gpufleet.settings.production",
                 PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    result = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "200"
    assert "text/css" in result.stdout


@pytest.mark.parametrize("missing", sorted(BASE_ENV))
def test_production_names_the_missing_variable(missing):
    result = load({k: v for k, v in BASE_ENV.items() if k != missing})
    assert result.returncode != 0
    assert f"{missing} must be set" in result.stderr
