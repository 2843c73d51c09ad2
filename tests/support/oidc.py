"""A real OpenID Connect provider (npm `oidc-provider`, tests/oidc/server.mjs) for sign-in tests.

`oidc_provider` (session) starts it on a free loopback port once the live Django server is up (the
provider must know the callback URL), waits for its discovery document and stops it at the end.
`oidc_settings` (per test) points Django at it and resets the test accounts. `sign_in()` drives a whole
authorization-code login with `requests`, the way a browser would, stopping at gpufleet's callback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from .services import REPO, free_port, missing, need_binary, running, wait_for

SERVER_DIR = REPO / "tests" / "oidc"
CLIENT_ID = "gpufleet-tests"
CLIENT_SECRET = "gpufleet-tests-client-secret"
TIMEOUT = 10

# alice: owner of acme (also listed as viewer: the strongest role wins) and platform admin; the other
# groups are noise a real directory would carry. bob: member of "other". carol: no gpufleet groups.
DEFAULT_ACCOUNTS: dict[str, dict[str, Any]] = {
    "alice": {
        "password": "alice-pw", "email": "alice@example.test", "given_name": "Alice", "family_name": "Admin",
        "groups": ["gpufleet:acme:viewer", "gpufleet:acme:owner", "platform-admin", "wiki-editors",
                   "gpufleet:ACME:owner", "gpufleet:acme:superuser"],
    },
    "bob": {"password": "bob-pw", "email": "bob@example.test", "groups": ["gpufleet:other:member"]},
    "carol": {"password": "carol-pw", "email": "carol@example.test", "groups": []},
}


@dataclass
class OidcProvider:
    issuer: str
    accounts_file: Path
    discovery: dict[str, Any]
    log_file: Path
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET

    def set_accounts(self, accounts: dict[str, dict[str, Any]]) -> None:
        # The server re-reads this file on every account lookup, so changes apply to the next sign-in.
        self.accounts_file.write_text(json.dumps(accounts))

    def set_groups(self, username: str, groups: list[str]) -> None:
        accounts = json.loads(self.accounts_file.read_text())
        accounts[username]["groups"] = groups
        self.set_accounts(accounts)


def _node_ready() -> str:
    node = need_binary("node")
    if not (SERVER_DIR / "node_modules" / "oidc-provider" / "package.json").is_file():
        missing("npm package oidc-provider is not installed (run `npm ci --prefix tests/oidc`)")
    return node


@pytest.fixture(scope="session")
def oidc_provider(live_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    node = _node_ready()
    port = free_port()
    workdir = tmp_path_factory.mktemp("oidc-provider")
    accounts_file = workdir / "accounts.json"
    accounts_file.write_text(json.dumps(DEFAULT_ACCOUNTS))
    log_file = workdir / "server.log"
    env = {
        **os.environ,
        "OIDC_PORT": str(port),
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_REDIRECT_URIS": f"{live_server.url}/oidc/callback/",
        "OIDC_POST_LOGOUT_REDIRECT_URIS": f"{live_server.url}/login/",
        "OIDC_ACCOUNTS_FILE": str(accounts_file),
    }
    issuer = f"http://127.0.0.1:{port}"
    with running([node, "server.mjs"], log_file, cwd=SERVER_DIR, env=env) as proc:
        discovery_url = f"{issuer}/.well-known/openid-configuration"
        wait_for(lambda: proc.poll() is None and requests.get(discovery_url, timeout=1).ok,
                 timeout=30, what=f"oidc-provider (log: {log_file})")
        discovery = requests.get(discovery_url, timeout=TIMEOUT).json()
        yield OidcProvider(issuer=issuer, accounts_file=accounts_file, discovery=discovery, log_file=log_file)


@pytest.fixture
def oidc_settings(oidc_provider: OidcProvider, settings: Any) -> OidcProvider:
    """Point gpufleet at the test provider (endpoints from its discovery document) for one test."""
    oidc_provider.set_accounts(DEFAULT_ACCOUNTS)
    d = oidc_provider.discovery
    settings.OIDC_OP_ISSUER = d["issuer"]
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = d["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = d["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = d["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = d["jwks_uri"]
    settings.OIDC_OP_LOGOUT_ENDPOINT = d["end_session_endpoint"]
    settings.OIDC_RP_CLIENT_ID = oidc_provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = oidc_provider.client_secret
    settings.OIDC_RP_SIGN_ALGO = "RS256"
    settings.GPUFLEET_OIDC_ENABLED = True
    return oidc_provider


# --- driving the browser side with requests -------------------------------------------------------


class _Forms(HTMLParser):
    """Collects <form> elements: action, method and the inputs/buttons that carry a name."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            form = {"action": a.get("action", ""), "method": a.get("method", "get").lower(), "fields": {}}
            self.forms.append(form)
            if a.get("id"):
                self._by_id[a["id"]] = form
        elif tag in {"input", "button"} and a.get("name"):
            # A control may sit outside its form and name it with form="…" (oidc-provider's logout page).
            form = self._by_id.get(a.get("form", "")) or (self.forms[-1] if self.forms else None)
            if form is not None:
                form["fields"][a["name"]] = a.get("value", "")


def forms_of(html: str) -> list[dict[str, Any]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


@dataclass
class SignIn:
    """What happened on the way: the authorization request's parameters and every URL visited."""

    authorization_params: dict[str, str] = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    callback_url: str = ""
    prompts: list[str] = field(default_factory=list)


def to_callback(http: requests.Session, base_url: str, username: str, password: str,
                start: str = "/oidc/authenticate/") -> SignIn:
    """Start a sign-in at gpufleet and act as the user at the provider until the callback URL is reached.

    The callback itself is not requested, so a test can look at (or tamper with) it first.
    """
    trace = SignIn()
    url = urljoin(base_url, start)
    callback_prefix = f"{base_url}/oidc/callback/"
    response = http.get(url, allow_redirects=False, timeout=TIMEOUT)
    for _ in range(20):
        trace.visited.append(url)
        if response.is_redirect:
            url = urljoin(url, response.headers["Location"])
            if len(trace.visited) == 1:  # gpufleet's redirect to the provider: the authorization request
                trace.authorization_params = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
            if url.startswith(callback_prefix):
                trace.callback_url = url
                return trace
            response = http.get(url, allow_redirects=False, timeout=TIMEOUT)
            continue
        forms = forms_of(response.text) if response.status_code == 200 else []
        if not forms or "/interaction/" not in url:
            raise AssertionError(f"unexpected page at {url} ({response.status_code}): {response.text[:500]}")
        fields = dict(forms[0]["fields"])
        trace.prompts.append(fields.get("prompt", "?"))
        if fields.get("prompt") == "login":
            if trace.prompts.count("login") > 1:
                raise AssertionError(f"login refused for {username}: {response.text[:300]}")
            fields.update(login=username, password=password)
        url = urljoin(url, forms[0]["action"])
        response = http.post(url, data=fields, allow_redirects=False, timeout=TIMEOUT)
    raise AssertionError(f"too many steps signing in: {trace.visited}")


def sign_in(http: requests.Session, base_url: str, username: str, password: str) -> tuple[SignIn, requests.Response]:
    """The whole login: returns the trace and gpufleet's answer to the callback (not followed)."""
    trace = to_callback(http, base_url, username, password)
    return trace, http.get(trace.callback_url, allow_redirects=False, timeout=TIMEOUT)
