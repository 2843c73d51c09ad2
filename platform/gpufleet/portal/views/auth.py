"""Sign in. OIDC is the way in; username/password exists only where the profile allows it.

Signing out is mozilla-django-oidc's OIDCLogoutView (portal/urls.py): it ends the provider's session too."""

from __future__ import annotations

from django.contrib.auth.views import LoginView as DjangoLoginView
from django.http import HttpRequest, HttpResponse

from gpufleet.core import conf


class LoginView(DjangoLoginView):
    template_name = "portal/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        # The form is hidden when password sign-in is off; refuse a hand-made POST too, or the
        # ModelBackend would still accept passwords in production.
        if not conf.PASSWORD_LOGIN:
            response = self.get(request, *args, **kwargs)
            response.status_code = 403
            return response
        return super().post(request, *args, **kwargs)


login = LoginView.as_view()
