"""OIDC sign-in (authorization code + PKCE via mozilla-django-oidc).

Users are created from claims and identified by (issuer, subject) — never by e-mail or username, which
providers let people change. The groups claim (GPUFLEET_OIDC_GROUPS_CLAIM) is the single source of truth
for platform roles (`platform-admin`, `billing-admin`) and for tenant memberships that came from OIDC
(`gpufleet:<tenant>:<role>`): every sign-in makes them match the claim. Memberships granted inside gpufleet
(source "local") are left alone.

mozilla-django-oidc checks the signature, expiry and nonce of the ID token; this module adds what OpenID
Connect Core requires on top (issuer, audience, authorized party, userinfo `sub` equal to the ID token's),
and turns every failure of the code exchange into a failed sign-in instead of an error page.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib import auth
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from gpufleet.core import conf

from . import actions
from .groups import GroupGrants, parse_groups

log = logging.getLogger(__name__)

__all__ = [
    "GpufleetAuthenticationRequestView",
    "GpufleetCallbackView",
    "GpufleetOIDCBackend",
    "GroupGrants",
    "parse_groups",
    "provider_logout_url",
]


def oidc_enabled() -> bool:
    return bool(conf.OIDC_ENABLED and settings.OIDC_OP_ISSUER)


def _issuer() -> str:
    return str(settings.OIDC_OP_ISSUER).rstrip("/")


class GpufleetOIDCBackend(OIDCAuthenticationBackend):
    def authenticate(self, request: HttpRequest | None, **kwargs: Any):  # type: ignore[no-untyped-def,override]
        # Django offers every credential set to every backend. Only the callback view passes a
        # code_verifier (PKCE is always on), so a password form with `?code=…&state=…` in its URL can
        # never trigger a code exchange here.
        if not oidc_enabled() or kwargs.get("code_verifier") is None:
            return None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        try:
            payload = super().verify_token(token, **kwargs)
        except jwt.PyJWTError as exc:
            # mozilla-django-oidc only maps DecodeError; an expired or not-yet-valid token would be a 500.
            raise SuspiciousOperation(f"ID token rejected: {exc}") from exc
        # OIDC Core 3.1.3.7: the ID token must come from our issuer and be meant for this client.
        if str(payload.get("iss", "")).rstrip("/") != _issuer():
            raise SuspiciousOperation("ID token issuer does not match OIDC_OP_ISSUER")
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token audience does not include this client")
        if len(audiences) > 1 and payload.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("ID token authorized party is not this client")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        userinfo = super().get_userinfo(access_token, id_token, payload)
        # OIDC Core 5.3.2: userinfo about another subject must not be used (token substitution).
        if str(userinfo.get("sub")) != str(payload.get("sub")):
            raise SuspiciousOperation("userinfo subject differs from the ID token subject")
        # Claims the provider put only in the ID token (some put groups there) still count; userinfo wins.
        return {**{k: v for k, v in payload.items() if k not in _TOKEN_ONLY_CLAIMS}, **userinfo}

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        # A subject is all we need; e-mail is optional (not every provider releases it).
        return bool(claims.get("sub"))

    def get_username(self, claims: dict[str, Any]) -> str:
        name = claims.get(conf.OIDC_USERNAME_CLAIM) or claims.get("email") or claims["sub"]
        return str(name).strip()[:150]

    def filter_users_by_claims(self, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        # Only the (issuer, subject) link identifies a user. Matching on username or e-mail would let a
        # provider account that merely *names* itself like an existing user take that user over.
        return self.UserModel.objects.filter(
            oidc_identities__issuer=_issuer(), oidc_identities__subject=str(claims["sub"])
        )

    def create_user(self, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        return actions.create_oidc_user(
            _issuer(), claims, username=self.get_username(claims),
            groups_claim=conf.OIDC_GROUPS_CLAIM,
        )

    def update_user(self, user, claims: dict[str, Any]):  # type: ignore[no-untyped-def]
        return actions.sync_oidc_user(user, claims, groups_claim=conf.OIDC_GROUPS_CLAIM)


# ID token bookkeeping that is not a claim about the user.
_TOKEN_ONLY_CLAIMS = frozenset({"iss", "aud", "azp", "exp", "iat", "nbf", "nonce", "at_hash", "c_hash",
                                "auth_time", "acr", "amr", "sid", "jti"})


class GpufleetAuthenticationRequestView(OIDCAuthenticationRequestView):
    """`/oidc/authenticate/`: only when a provider is configured (otherwise it would redirect to nowhere)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("OIDC sign-in is not configured")
        return super().get(request)


class GpufleetCallbackView(OIDCAuthenticationCallbackView):
    """`/oidc/callback/`: a bad or replayed callback is a failed sign-in (redirect, no session), not a 500."""

    @property
    def failure_url(self) -> str:
        return resolve_url(getattr(settings, "LOGIN_REDIRECT_URL_FAILURE", settings.LOGIN_URL))

    def get(self, request: HttpRequest) -> HttpResponse:
        if not oidc_enabled():
            raise Http404("OIDC sign-in is not configured")
        # RFC 9207: when the provider names itself in the response, it must be ours (mix-up defence).
        iss = request.GET.get("iss")
        if iss is not None and iss.rstrip("/") != _issuer():
            return self._fail(request, "callback issuer %r is not the configured provider", iss)
        try:
            return super().get(request)
        except SuspiciousOperation as exc:  # unknown/tampered state, bad token, subject mismatch
            return self._fail(request, "rejected OIDC callback: %s", exc)
        except requests.RequestException as exc:  # code exchange refused (replayed code, PKCE mismatch…)
            return self._fail(request, "OIDC code exchange failed: %s", exc)

    def _fail(self, request: HttpRequest, message: str, *args: object) -> HttpResponse:
        log.warning(message, *args)
        if request.user.is_authenticated:
            auth.logout(request)
        return self.login_failure()


def provider_logout_url(request: HttpRequest) -> str:
    """Where to send the browser after the Django session ends (OIDC_OP_LOGOUT_URL_METHOD).

    RP-initiated logout (OIDC RP-Initiated Logout 1.0) when the provider has an end-session endpoint,
    so signing out of gpufleet also ends the provider session; otherwise gpufleet's own sign-in page.
    """
    local = resolve_url(settings.LOGOUT_REDIRECT_URL)
    endpoint = getattr(settings, "OIDC_OP_LOGOUT_ENDPOINT", "")
    if not oidc_enabled() or not endpoint:
        return local
    params = {"client_id": settings.OIDC_RP_CLIENT_ID, "post_logout_redirect_uri": request.build_absolute_uri(local)}
    id_token = request.session.get("oidc_id_token")
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}?{urlencode(params)}"
