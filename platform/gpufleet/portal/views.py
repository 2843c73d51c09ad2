from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants.models import Tenant


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "portal/home.html", {"tenants": Tenant.objects.for_user(request.user)})


def login(request: HttpRequest) -> HttpResponse:
    from django.contrib.auth.views import LoginView

    return LoginView.as_view(template_name="portal/login.html")(request)
