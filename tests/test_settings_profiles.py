"""The production profile: refuses to start without its secrets (naming the missing variable) or with a
weak signing key; HTTPS only behind the ingress (redirect, HSTS); `check --deploy` is clean."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.services import REPO

BASE_ENV = {
    "SECRET_KEY": "k3y-" + "0123456789abcdef" * 4,
    "ALLOWED_HOSTS": "gpufleet.example.com",
    "OIDC_OP_ISSUER": "https://idp.example.com",
    "OIDC_RP_CLIENT_ID": "gpufleet",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.gpu.corp.internal",
    # The suite's own server: a few checks below serve a request, which may open a connection.
    "DATABASE_URL": os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/gpufleet",
}


def production_env(env: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in BASE_ENV and not k.startswith(("SECURE_", "DJANGO_", "DEBUG"))}
    clean.update(env, DJANGO_SETTINGS_MODULE="gpufleet.settings.production",
                 PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    return clean


def run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=production_env(env), capture_output=True, text=True,
                          cwd=REPO)


def load(env: dict[str, str]) -> subprocess.CompletedProcess:
    # Endpoints are lazy (discovered at first use): printing whether it is lazy contacts no provider.
    return run("import django; django.setup(); from django.conf import settings; "
               "from django.utils.functional import Promise; e = settings.OIDC_OP_TOKEN_ENDPOINT; "
               "print('discovered-lazily' if isinstance(e, Promise) else e)", env)


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
        "r = Client().get('/static/portal/portal.css', HTTP_HOST='gpufleet.example.com', "
        "HTTP_X_FORWARDED_PROTO='https'); "
        "print(r.status_code, r.headers.get('Content-Type'))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in BASE_ENV}
    clean.update(BASE_ENV, DJANGO_SETTINGS_MODULE="gpufleet.settings.production",
                 PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "platform")]))
    result = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "200"
    assert "text/css" in result.stdout


@pytest.mark.parametrize("url", ["sqlite:///var/gpufleet.sqlite3", "mysql://root@127.0.0.1/gpufleet"])
def test_a_database_other_than_postgresql_stops_start_up_in_one_line(tmp_path, url):
    """PostgreSQL is the only engine: the console script says so in one line (no traceback), and every
    profile refuses it at settings time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(DATABASE_URL=url, GPUFLEET_VAR_DIR=str(tmp_path / "var"))
    result = subprocess.run([sys.executable, "-m", "gpufleet.cli", "tenant", "list"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "PostgreSQL only" in lines[0] and "DATABASE_URL" in lines[0], result.stderr
    production = load({**BASE_ENV, "DATABASE_URL": url})
    assert production.returncode != 0 and "PostgreSQL only" in production.stderr


@pytest.mark.parametrize("missing", sorted(BASE_ENV))
def test_production_names_the_missing_variable(missing):
    result = load({k: v for k, v in BASE_ENV.items() if k != missing})
    assert result.returncode != 0
    assert f"{missing} must be set" in result.stderr


@pytest.mark.parametrize(("key", "reason"), [
    ("insecure-development-key-not-for-production", "known development default"),
    ("test-secret-key", "known development default"),
    ("django-insecure-" + "a1b2c3d4e5" * 5, "known development default"),
    ("s3cret", "is 6 characters"),
    ("x" * 64, "different characters"),
])
def test_production_refuses_a_weak_or_default_secret_key(key, reason):
    result = load({**BASE_ENV, "SECRET_KEY": key})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and reason in result.stderr, result.stderr[-500:]


def test_check_deploy_is_clean_in_the_production_profile():
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            env=production_env(BASE_ENV), capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout, result.stdout


def test_https_only_behind_the_ingress():
    code = (
        "import django; django.setup(); from django.test import Client; c = Client(); "
        "plain = c.get('/login/', HTTP_HOST='gpufleet.example.com'); "
        "tls = c.get('/login/', HTTP_HOST='gpufleet.example.com', HTTP_X_FORWARDED_PROTO='https'); "
        "print(plain.status_code, plain.headers.get('Location')); "
        "print(tls.status_code); print(tls.headers.get('Strict-Transport-Security')); "
        "print(tls.headers.get('Content-Security-Policy'))"
    )
    result = run(code, BASE_ENV)
    assert result.returncode == 0, result.stderr
    redirect, status, hsts, csp = result.stdout.strip().splitlines()[-4:]
    assert redirect == "301 https://gpufleet.example.com/login/"
    assert status == "200"
    assert hsts == "max-age=31536000; includeSubDomains"
    assert "script-src 'self'" in csp and "form-action 'self' https://idp.example.com" in csp


def test_production_never_hands_out_a_ca_less_kubeconfig() -> None:
    """Issue 26, F2: the refusal cannot be turned off, and the CA store cannot be emptied from the environment
    (the refusal itself: tests/isolation/test_vcluster_ca.py)."""
    pinned = run("import django; django.setup(); from django.conf import settings; "
                 "print(settings.GPUFLEET_KUBECONFIG_REQUIRE_CA, settings.GPUFLEET_VCLUSTER_CA_STORE)",
                 {**BASE_ENV, "GPUFLEET_KUBECONFIG_REQUIRE_CA": "0", "GPUFLEET_VCLUSTER_CA_STORE": ""})
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout.split() == ["True", "gpufleet-openbao"]
