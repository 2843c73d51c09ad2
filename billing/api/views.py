"""/api/v1/billing/: usage (tenant members), invoices (tenant owners, billing admins), prices,
reconciliation and exports (billing admins). Every queryset is scoped with for_user; writes go
through billing.actions."""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gpufleet.accounts.roles import is_billing_admin
from gpufleet.api.answercache import CachedReadsMixin
from gpufleet.api.permissions import IsBillingAdmin
from gpufleet.api.prefetch import attach_rows
from gpufleet.api.representation import read_columns, row_lookups
from gpufleet.api.serializers import no_body
from gpufleet.api.viewsets import ScopedReadOnlyViewSet
from gpufleet.core.errors import ActionError
from infra.errors import PermanentError, TransientError
from tenants.models import Tenant

from .. import actions, exports, opencost_source, reconciliation
from ..models import Invoice, InvoiceLine, Price, UsageRecord
from ..periods import parse_period, period_bounds
from ..usage_view import daily_usage
from .serializers import (
    DraftSerializer,
    InvoiceLineSerializer,
    InvoiceSerializer,
    PriceSerializer,
    PriceSetSerializer,
    VoidSerializer,
)


def _require_billing_admin(request: Request) -> None:
    if not is_billing_admin(request.user):
        raise PermissionDenied("only billing admins may do this")


def _lines():  # type: ignore[no-untyped-def]
    return InvoiceLine.objects.select_related("adjusts")


# What InvoiceSerializer shows of an invoice: its columns, and its tenant's slug and replaced invoice's number
# rather than those rows' other columns (the tenant's JSON, its dates: benchmarks/README.md, "API").
INVOICE_READ_COLUMNS = read_columns(InvoiceSerializer)
# What InvoiceLineSerializer shows, read as rows for list and retrieve answers (gpufleet/api/prefetch.py).
LINE_COLUMNS = row_lookups(InvoiceLineSerializer)


class InvoiceViewSet(CachedReadsMixin, ScopedReadOnlyViewSet):
    queryset = Invoice.objects.select_related("tenant", "replaces")
    serializer_class = InvoiceSerializer

    def paginate_queryset(self, queryset):  # type: ignore[no-untyped-def]
        # The page's lines in one query, without a queryset clone per invoice (gpufleet/api/prefetch.py).
        page = super().paginate_queryset(queryset)
        return page if page is None else attach_rows(page, "lines", InvoiceLine.objects.all(), LINE_COLUMNS)

    def get_object(self) -> Invoice:
        invoice = super().get_object()
        if self.action == "retrieve":
            attach_rows([invoice], "lines", InvoiceLine.objects.all(), LINE_COLUMNS)
        return invoice

    def get_queryset(self):  # type: ignore[no-untyped-def]
        qs = super().get_queryset()
        if self.action not in ("list", "retrieve"):  # those attach line rows (above)
            qs = qs.prefetch_related(Prefetch("lines", queryset=_lines()))
        if self.action in ("list", "retrieve"):
            qs = qs.only(*INVOICE_READ_COLUMNS)
        params = self.request.query_params
        if params.get("period"):
            qs = qs.filter(period=_period(params["period"]))
        if params.get("tenant"):
            qs = qs.filter(tenant__slug=params["tenant"])
        return qs

    @extend_schema(responses={200: None})
    @action(detail=True, methods=["get"])
    def download(self, request: Request, pk: str | None = None) -> HttpResponse:
        invoice = self.get_object()
        # `?as=` because DRF reserves `?format=` for content negotiation.
        fmt = request.query_params.get("as", "csv")
        if fmt not in ("csv", "json"):
            raise ValidationError({"as": ["must be csv or json"]})
        content = exports.to_csv([invoice]) if fmt == "csv" else exports.to_json([invoice])
        response = HttpResponse(content, content_type="text/csv" if fmt == "csv" else "application/json")
        name = invoice.number or f"draft-{invoice.tenant.slug}-{invoice.period_label}"
        response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
        return response

    def _admin(self, request: Request, fn) -> Response:  # type: ignore[no-untyped-def]
        invoice = self.get_object()  # 404 first
        _require_billing_admin(request)
        invoice = fn(invoice)
        return Response(InvoiceSerializer(self.get_queryset().get(pk=invoice.pk)).data)

    @extend_schema(request=None, responses={200: InvoiceSerializer})
    @action(detail=True, methods=["post"])
    @no_body
    def finalize(self, request: Request, pk: str | None = None) -> Response:
        return self._admin(request, lambda inv: actions.finalize(inv.pk))

    @extend_schema(request=VoidSerializer, responses={200: InvoiceSerializer})
    @action(detail=True, methods=["post"])
    def void(self, request: Request, pk: str | None = None) -> Response:
        payload = VoidSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        return self._admin(request, lambda inv: actions.void(inv.pk, payload.validated_data["reason"]))

    @extend_schema(request=None, responses={200: InvoiceSerializer})
    @action(detail=True, methods=["post"])
    @no_body
    def reissue(self, request: Request, pk: str | None = None) -> Response:
        return self._admin(request, lambda inv: actions.reissue(inv.pk))

    @extend_schema(request=DraftSerializer, responses={200: InvoiceSerializer(many=True)})
    @action(detail=False, methods=["post"], permission_classes=[IsAuthenticated, IsBillingAdmin])
    def draft(self, request: Request) -> Response:
        payload = DraftSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        period = parse_period(payload.validated_data["period"])
        tenants = None
        if payload.validated_data.get("tenant"):
            tenants = list(Tenant.objects.filter(slug=payload.validated_data["tenant"]))
            if not tenants:
                raise ActionError({"tenant": [f"no tenant {payload.validated_data['tenant']!r}"]})
        invoices = actions.draft_all(period, tenants=tenants, opencost=opencost_source.invoice_figures(period))
        qs = self.get_queryset().filter(pk__in=[i.pk for i in invoices])
        return Response(InvoiceSerializer(qs, many=True).data)

    # Finalized invoices are immutable; there is no update or delete route at all.


class PriceViewSet(ScopedReadOnlyViewSet):
    queryset = Price.objects.select_related("flavor", "cluster")
    serializer_class = PriceSerializer

    @extend_schema(request=PriceSetSerializer, responses={201: PriceSerializer})
    def create(self, request: Request) -> Response:
        _require_billing_admin(request)
        payload = PriceSetSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        price = actions.set_price(data["flavor"], data["per_unit_hour"], data["currency"],
                                  data.get("effective_from"), cluster=data.get("cluster"))
        return Response(PriceSerializer(price).data, status=status.HTTP_201_CREATED)


def _period(value: str | None):  # type: ignore[no-untyped-def]
    return parse_period(value)


PERIOD_PARAM = OpenApiParameter("period", OpenApiTypes.STR, required=True, description="billing month, YYYY-MM")


class UsageView(CachedReadsMixin, APIView):
    """GET ?tenant=SLUG&period=YYYY-MM: usage by day and flavor (members of the tenant)."""

    @extend_schema(parameters=[OpenApiParameter("tenant", OpenApiTypes.STR, required=True), PERIOD_PARAM],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        slug = request.query_params.get("tenant", "")
        if not slug:  # a missing parameter is the caller's mistake (400), not an unknown tenant (404)
            raise ValidationError({"tenant": ["is required (?tenant=SLUG&period=YYYY-MM)"]})
        period = _period(request.query_params.get("period"))
        tenant = Tenant.objects.for_user(request.user).filter(slug=slug).first()
        if tenant is None:
            raise NotFound()
        data = daily_usage(UsageRecord.objects.for_user(request.user), tenant.pk, period)
        data["rows"] = [{**r, "unit_seconds": str(r["unit_seconds"]),
                         "gpu_equivalent_seconds": str(r["gpu_equivalent_seconds"])} for r in data["rows"]]
        return Response({"tenant": tenant.slug, "period": period.strftime("%Y-%m"), **data})


class OpenCostUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    # The body says only this (gpufleet.api.errors: a 5xx names no host or exception text; the log does).
    default_detail = "OpenCost could not be queried; try again later"
    default_code = "opencost_unavailable"


class ReconciliationView(APIView):
    permission_classes = [IsAuthenticated, IsBillingAdmin]

    @extend_schema(parameters=[PERIOD_PARAM], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        start, end = period_bounds(_period(request.query_params.get("period")))
        try:
            views = opencost_source.namespace_views(start, end)
        except (TransientError, PermanentError) as exc:
            raise OpenCostUnavailable(f"OpenCost could not be queried: {exc}") from exc
        rows = reconciliation.report(start, end, views)
        return Response([row.as_json() for row in rows])


class ExportView(APIView):
    permission_classes = [IsAuthenticated, IsBillingAdmin]

    @extend_schema(parameters=[PERIOD_PARAM, OpenApiParameter("as", OpenApiTypes.STR, enum=list(exports.FORMATS))],
                   responses={200: OpenApiTypes.BINARY})
    def get(self, request: Request) -> HttpResponse:
        period = _period(request.query_params.get("period"))
        fmt = request.query_params.get("as", "csv")
        if fmt not in exports.FORMATS:
            raise ValidationError({"as": [f"must be one of {', '.join(exports.FORMATS)}"]})
        content, media = exports.export(period, fmt)
        response = HttpResponse(content, content_type=media)
        suffix = "focus.csv" if fmt == "focus" else fmt
        response["Content-Disposition"] = f'attachment; filename="invoices-{period:%Y-%m}.{suffix}"'
        return response

