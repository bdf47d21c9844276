"""The catalog (products by SKU, with prices and stock) and the quotes priced from it."""

from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpResponse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request

from core.errors import ValidationFailed
from integration import selectors
from integration.schema import read_schema, write_schema
from integration.serializers.filters import ProductFilter, QuoteFilter
from integration.serializers.sales import (
    ProductOut,
    QuoteAcceptIn,
    QuoteDeliverIn,
    QuoteIn,
    QuoteOut,
    QuoteRejectIn,
)
from integration.serializers.strict import EmptyIn
from integration.views.base import ResourceViewSet
from sales.selectors import opportunity_get
from sales.services import (
    QuoteItem,
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
    quote_send,
)


@extend_schema_view(
    list=read_schema(ProductOut(many=True), parameters=[ProductFilter]),
    retrieve=read_schema(ProductOut),
)
class ProductViewSet(ResourceViewSet):
    """The catalog with the current price list's prices and available stock, by SKU."""

    resource = "products"
    permission_model = "sales.product"
    serializer_class = ProductOut
    filter_class = ProductFilter
    lookup_field = "sku"
    # Any text but a slash, and but a NUL character, which no SKU can hold (PostgreSQL refuses
    # it in a query, which would answer a mistyped URL as an outage): such a URL is not found.
    lookup_value_regex = r"[^/\x00]{1,64}"
    ordering_fields = ["name", "sku"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet:
        f = self.filters
        return selectors.product_list(
            company=self.company, search=f.get("search"), active=f.get("active")
        )

    def get_object(self) -> Any:
        return selectors.product_get(company=self.company, sku=self.kwargs["sku"])

    def get_serializer_context(self) -> dict[str, Any]:
        currency = selectors.product_currency(company=self.company)
        return {**super().get_serializer_context(), "currency": currency}


@extend_schema_view(
    list=read_schema(QuoteOut(many=True), parameters=[QuoteFilter]),
    retrieve=read_schema(QuoteOut),
)
class QuoteViewSet(ResourceViewSet):
    """Quotes, priced by the system from the catalog and the current price list; stock is
    reserved at acceptance, consumed when the order is delivered, released when it is
    cancelled."""

    resource = "quotes"
    permission_model = "sales.quote"
    serializer_class = QuoteOut
    filter_class = QuoteFilter
    ordering_fields = ["created_at", "valid_until"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}
    transition_target = "quote"

    def get_queryset(self) -> QuerySet:
        f = self.filters
        return selectors.quote_list(
            company=self.company,
            state=f.get("state"),
            contact=f.get("contact"),
            **self.date_filters(),
        )

    def get_object(self) -> Any:
        return selectors.quote_get(company=self.company, reference=self.kwargs["reference"])

    @write_schema(QuoteIn, QuoteOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            company = self.company
            contact = selectors.contact_get(company=company, reference=data["contact"])
            opportunity = None
            if "opportunity" in data:
                opportunity = opportunity_get(company=company, reference=data["opportunity"])
                if opportunity.contact_id != contact.pk:
                    raise ValidationFailed(
                        _("Esa oportunidad es de otro contacto."),
                        code="opportunity_of_another_contact",
                    )
            return quote_create(
                company=company,
                contact=contact,
                items=[QuoteItem(sku=i["sku"], quantity=i["quantity"]) for i in data["items"]],
                expected_total=data.get("expected_total"),
                opportunity=opportunity,
                send=data.get("send", True),
                by=self.by,
            )

        return self.write(QuoteIn, perform, status=201)

    @write_schema(EmptyIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def send(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(quote_send)

    @write_schema(QuoteAcceptIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            QuoteAcceptIn,
            lambda data: quote_accept(
                quote=self.get_object(), expected_total=data.get("expected_total"), by=self.by
            ),
        )

    @write_schema(QuoteRejectIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            QuoteRejectIn,
            lambda data: quote_reject(
                quote=self.get_object(), reason=data.get("reason", ""), by=self.by
            ),
        )

    @write_schema(EmptyIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def expire(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(quote_expire)

    @write_schema(QuoteDeliverIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def deliver(self, request: Request, reference: str) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            items = None
            if "items" in data:
                items = [QuoteItem(sku=i["sku"], quantity=i["quantity"]) for i in data["items"]]
            return quote_deliver(quote=self.get_object(), items=items, by=self.by)

        return self.write(QuoteDeliverIn, perform)

    @write_schema(EmptyIn, QuoteOut)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(quote_cancel)
