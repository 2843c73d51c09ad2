"""The price list (every signed-in user: they need it to plan) and the billing admins' price form. The write
goes through billing.actions.set_price (checked and audited there); its errors are shown next to their fields."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from gpufleet import clock
from gpufleet.accounts.roles import is_billing_admin
from gpufleet.core import conf
from gpufleet.core.errors import ActionError
from scheduling.clusters.models import Cluster
from scheduling.models import Flavor

from . import actions
from .forms import PriceForm
from .models import Price
from .views import _action_failed

PRICES_PER_PAGE = 100


@login_required
def price_list(request: HttpRequest) -> HttpResponse:
    """Prices in force today and those announced for later; ended ones stay on invoices and in the API."""
    today = clock.today()
    prices = (Price.objects.for_user(request.user).filter(Q(effective_to__isnull=True) | Q(effective_to__gt=today))
              .select_related("flavor", "cluster"))
    page = Paginator(prices, PRICES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "billing/price_list.html", {"prices": page.object_list, "page_obj": page, "today": today})


@login_required
def price_set(request: HttpRequest) -> HttpResponse:
    if not is_billing_admin(request.user):
        raise PermissionDenied("only billing admins may set prices")
    currencies = list(conf.CURRENCIES)
    default_currency = conf.BILLING_CURRENCY
    form = PriceForm(
        request.POST if request.method == "POST" else None,
        flavors=list(Flavor.objects.order_by("name").values_list("name", flat=True)),
        clusters=list(Cluster.objects.order_by("name").values_list("name", flat=True)), currencies=currencies,
        initial={"currency": default_currency if default_currency in currencies else None,
                 "effective_from": clock.today().isoformat(), "flavor": request.GET.get("flavor")})
    status = 400
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            price = actions.set_price(data["flavor"], data["per_unit_hour"], data["currency"],
                                      data["effective_from"] or None, cluster=data["cluster"] or None)
        except ActionError as exc:
            status = _action_failed(form, exc)
        else:
            where = f" on {price.cluster.name}" if price.cluster_id else " on every cluster"
            messages.success(request, f"{price.flavor.name}{where}: {price.per_unit_hour.normalize():f} "
                                      f"{price.currency} per unit-hour from {price.effective_from}.")
            return redirect("billing:price-list")
    return render(request, "billing/price_set.html", {"form": form},
                  status=status if request.method == "POST" else 200)
