"""Username/password sign-in, only where the settings profile allows it (demo and tests).

Production signs in through OIDC alone. Django still needs ModelBackend for permission checks and for
loading the user of an existing session, so this wrapper keeps all of that and refuses only passwords.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from gpufleet.core import conf


class PasswordBackend(ModelBackend):
    def authenticate(  # type: ignore[override]
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if not conf.PASSWORD_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
