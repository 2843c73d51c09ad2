"""Sign in and out. OIDC is the way in; username/password exists only where the profile allows it."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import LoginView as DjangoLoginView
from django.contrib.auth.views import LogoutView
from django.http import HttpRequest, HttpResponse


class LoginView(DjangoLoginView):
    template_name = "portal/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        # The form is hidden when password sign-in is off; refuse a hand-made POST too, or the
        # ModelBackend would still accept passwords in production.
        if not settings.GPUFLEET_PASSWORD_LOGIN:
            response = self.get(request, *args, **kwargs)
            response.status_code = 403
            return response
        return super().post(request, *args, **kwargs)


login = LoginView.as_view()
# Django's LogoutView accepts POST only (a GET link could sign people out from another site).
logout = LogoutView.as_view()
