"""The integration API's views: thin DRF viewsets over the domain selectors and services.

Reads go through selectors scoped to the caller's company. Every write (a creation or a state
transition, always POST) goes through `CompanyViewSet.write`: the Idempotency-Key header is
checked (seed 2), the body validated, and the service call runs as the effect of the one
idempotency engine, keyed by (company, key) and fingerprinted by the route and the validated
request, so a retry replays the stored answer instead of acting twice.
"""

from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from functools import cached_property
from typing import Any

from django.db import IntegrityError
from django.db.models import Model, QuerySet
from django.http import HttpResponse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agenda import clock
from agenda.availability import describe_instant, search_window, slots_available
from agenda.models import Appointment
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_mark_attended,
    appointment_mark_no_show,
    appointment_reschedule,
)
from core.errors import ValidationFailed
from core.idempotency import check_http_key, idempotent_execute
from core.models import Company
from core.normalize import normalize_document, normalize_email, normalize_phone
from core.outcome import Outcome, outcome_response
from core.references import normalize_reference
from core.services import contact_create
from integration import selectors
from integration import serializers as s
from integration.authentication import COMPANY_PARAMETER, IntegrationAccess
from integration.pagination import Pagination, StableOrdering
from integration.schema import read_schema, write_schema
from sales.selectors import opportunity_get
from sales.services import (
    QuoteItem,
    opportunity_create,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
    quote_accept,
    quote_create,
    quote_expire,
    quote_reject,
    quote_send,
)
from support.models import Case
from support.selectors import case_get
from support.services import (
    case_close,
    case_open,
    case_reopen,
    case_resolve,
    case_resume,
    case_start,
    case_wait_for_customer,
)

API_PREFIX = "/api/v1"


def canonical(value: Any) -> Any:
    """A validated request as JSON values, for the idempotency fingerprint: instants in UTC,
    decimals by value (53.3 and 53.30 are the same amount)."""
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


class CompanyViewSet(viewsets.GenericViewSet):
    """Base of every resource: the caller's company, its language and time zone, public
    references, validated filters, and the idempotent write path."""

    lookup_field = "reference"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9-]{0,31}"
    filter_backends = [StableOrdering]
    ordering_fields: list[str] = []
    filter_class: type[serializers.Serializer] | None = None
    # Query parameters every list takes besides its filters: the staff member's company and
    # the browsable API's format.
    list_parameters: tuple[str, ...] = (COMPANY_PARAMETER, "format")
    # The model ("app_label.model") whose view/add/change permission a staff member's role
    # must grant in the company for a read, a creation or a transition (HasCompanyAccess).
    permission_model = ""
    # kind -> attribute holding the id, for batch-drawing the references a page shows
    reference_sources: dict[str, str] = {}
    resource = ""

    @property
    def access(self) -> IntegrationAccess:
        return self.request.auth

    @property
    def company(self) -> Company:
        return self.access.company

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # Messages in the company's language; times read and written in its time zone.
        translation.activate(self.company.language)
        timezone.activate(self.company.tz)

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            timezone.deactivate()

    def company_permission(self) -> str:
        """The permission ("app_label.codename") this request's action needs, as the admin
        names it: view to read, add to create, change for any transition."""
        if self.action in (None, "list", "retrieve", "metadata"):
            verb = "view"  # None: a method the view does not serve, answered 405 after this
        elif self.action == "create":
            verb = "add"
        else:
            verb = "change"
        app_label, model = self.permission_model.split(".")
        return f"{app_label}.{verb}_{model}"

    @cached_property
    def references(self) -> s.ReferenceBook:
        return s.ReferenceBook(self.company)

    def get_serializer_context(self) -> dict[str, Any]:
        return {
            **super().get_serializer_context(),
            "company": self.company,
            "references": self.references,
        }

    @cached_property
    def filters(self) -> dict[str, Any]:
        if self.filter_class is None:
            return {}
        known = {*self.filter_class().fields, *self.list_parameters}
        unknown = sorted(set(self.request.query_params) - known)
        if unknown:
            # A mistyped filter must not answer every row as if it matched.
            raise serializers.ValidationError(
                {name: [_("Este parámetro no existe.")] for name in unknown},
                code="unknown_parameter",
            )
        serializer = self.filter_class(data=dict(self.request.query_params.items()))
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def date_filters(self) -> dict[str, Any]:
        return {"date_from": self.filters.get("date_from"), "date_to": self.filters.get("date_to")}

    def get_object(self) -> Any:
        raise NotImplementedError

    def output(self, instance: Any) -> dict[str, Any]:
        self.prefetch_references([instance])
        return self.get_serializer(instance).data

    def prefetch_references(self, rows: list[Any]) -> None:
        for kind, attribute in self.reference_sources.items():
            self.references.prefetch(kind, [getattr(row, attribute) for row in rows])

    # --- Writes ------------------------------------------------------------------------

    def route(self) -> str:
        """The operation stored with the idempotency record: method and route template."""
        if self.action == "create":
            return f"POST {API_PREFIX}/{self.resource}"
        url_path = getattr(self, self.action).url_path
        return f"POST {API_PREFIX}/{self.resource}/{{{self.lookup_field}}}/{url_path}"

    def write(
        self,
        input_class: type[serializers.Serializer],
        perform: Callable[[dict[str, Any]], Model],
        *,
        status: int = 200,
    ) -> HttpResponse:
        key = check_http_key(self.request.headers.get("Idempotency-Key"))
        data = self.validated(input_class)
        request = {"body": canonical(data)}
        if self.lookup_field in self.kwargs:
            request["target"] = normalize_reference(self.kwargs[self.lookup_field])

        def effect() -> tuple[dict[str, Any], int]:
            return self.output(perform(data)), status

        result = idempotent_execute(
            company=self.company, key=key, operation=self.route(), request=request, effect=effect
        )
        return outcome_response(
            Outcome(
                body=result.body, is_error=False, status=result.status, replayed=result.replayed
            )
        )

    def validated(self, input_class: type[serializers.Serializer]) -> dict[str, Any]:
        serializer = input_class(data=self.request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    @property
    def by(self) -> Any:
        return self.access.actor


class ResourceViewSet(CompanyViewSet):
    """A resource listed (paginated, filtered, ordered) and retrieved by its reference."""

    list_parameters = (
        *CompanyViewSet.list_parameters,
        StableOrdering.ordering_param,
        *Pagination.query_parameters,
    )

    def list(self, request: Request) -> Response:
        rows = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        self.prefetch_references(rows)
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(self.output(self.get_object()))


def _filters(filter_class: type[serializers.Serializer]) -> dict[str, Any]:
    return {"parameters": [filter_class]}


# --- Contacts, services, professionals, slots ----------------------------------------------


@extend_schema_view(
    list=read_schema(s.ContactOut(many=True), **_filters(s.ContactFilter)),
    retrieve=read_schema(s.ContactOut),
)
class ContactViewSet(ResourceViewSet):
    """The company's contacts (customers)."""

    resource = "contacts"
    permission_model = "core.contact"
    serializer_class = s.ContactOut
    filter_class = s.ContactFilter
    ordering_fields = ["created_at", "first_name", "last_name"]
    ordering = ["first_name", "last_name"]
    reference_sources = {"contact": "pk"}

    def get_queryset(self) -> QuerySet:
        f, country = self.filters, self.company.country
        return selectors.contact_list(
            company=self.company,
            search=f.get("search"),
            email=normalize_email(f["email"]) if "email" in f else None,
            phone=normalize_phone(f["phone"], country) if "phone" in f else None,
            document_number=normalize_document(f["document_number"], country)
            if "document_number" in f
            else None,
            **self.date_filters(),
        )

    def get_object(self) -> Any:
        return selectors.contact_get(company=self.company, reference=self.kwargs["reference"])

    @write_schema(s.ContactIn, s.ContactOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            try:
                return contact_create(company=self.company, **data)
            except IntegrityError:
                raise ValidationFailed(
                    _("Ya existe un contacto con ese documento, teléfono o correo."),
                    code="contact_exists",
                ) from None

        return self.write(s.ContactIn, perform, status=201)


@extend_schema_view(
    list=read_schema(s.ServiceOut(many=True), **_filters(s.ServiceFilter)),
    retrieve=read_schema(s.ServiceOut),
)
class ServiceViewSet(ResourceViewSet):
    """Bookable services (managed by staff in the admin)."""

    resource = "services"
    permission_model = "agenda.service"
    serializer_class = s.ServiceOut
    filter_class = s.ServiceFilter
    ordering_fields = ["name", "duration_minutes"]
    ordering = ["name"]
    reference_sources = {"service": "pk"}

    def get_queryset(self) -> QuerySet:
        return selectors.service_list(company=self.company, active=self.filters.get("active"))

    def get_object(self) -> Any:
        return selectors.service_get(company=self.company, reference=self.kwargs["reference"])


@extend_schema_view(
    list=read_schema(s.ProfessionalOut(many=True), **_filters(s.ProfessionalFilter)),
    retrieve=read_schema(s.ProfessionalOut),
)
class ProfessionalViewSet(ResourceViewSet):
    """Professionals and the services they give (managed by staff in the admin)."""

    resource = "professionals"
    permission_model = "agenda.professional"
    serializer_class = s.ProfessionalOut
    filter_class = s.ProfessionalFilter
    ordering_fields = ["display_name"]
    ordering = ["display_name"]
    reference_sources = {"professional": "pk"}

    def get_queryset(self) -> QuerySet:
        return selectors.professional_list(
            company=self.company,
            active=self.filters.get("active"),
            service=self.filters.get("service"),
        )

    def get_object(self) -> Any:
        return selectors.professional_get(company=self.company, reference=self.kwargs["reference"])


@extend_schema_view(list=read_schema(s.SlotListOut, parameters=[s.SlotFilter]))
class SlotViewSet(CompanyViewSet):
    """Free start times of a service, soonest first, validated again when booking."""

    resource = "slots"
    permission_model = "agenda.appointment"
    serializer_class = s.SlotOut
    filter_class = s.SlotFilter
    pagination_class = None
    filter_backends = []

    def list(self, request: Request) -> Response:
        f, company, now = self.filters, self.company, clock.now()
        service = selectors.service_get(company=company, reference=f["service"])
        professional = (
            selectors.professional_get(company=company, reference=f["professional"])
            if "professional" in f
            else None
        )
        first_day = f.get("date_from") or now.astimezone(company.tz).date()
        last_day = f.get("date_to")
        window = search_window(
            company=company,
            from_text=first_day.isoformat(),
            to_text=last_day.isoformat() if last_day else None,
            now=now,
        )
        limit = f.get("limit", 20)
        found = slots_available(
            company=company,
            service=service,
            starts_at=window.start,
            ends_at=window.end,
            now=now,
            professional=professional,
            limit=limit + 1,
        )
        slots = [
            {
                "starts_at": slot.starts_at,
                "ends_at": slot.ends_at,
                **describe_instant(slot.starts_at, company.tz),
                "professional": slot.professional,
            }
            for slot in found[:limit]
        ]
        self.references.prefetch("professional", [slot.professional.pk for slot in found])
        body = {
            "service": self.references.get("service", service.pk),
            "results": s.SlotOut(slots, many=True, context=self.get_serializer_context()).data,
            # A range longer than a search covers was narrowed: more may exist after it.
            "has_more": len(found) > limit or window.narrowed,
        }
        return Response(body)


# --- Appointments ------------------------------------------------------------------------


@extend_schema_view(
    list=read_schema(s.AppointmentOut(many=True), **_filters(s.AppointmentFilter)),
    retrieve=read_schema(s.AppointmentOut),
)
class AppointmentViewSet(ResourceViewSet):
    """Appointments. Bookings and changes follow the customer rules (minimum notice, horizon,
    cancellation cut-off) and are re-validated at the instant; staff override in the admin."""

    resource = "appointments"
    permission_model = "agenda.appointment"
    serializer_class = s.AppointmentOut
    filter_class = s.AppointmentFilter
    ordering_fields = ["starts_at", "created_at"]
    ordering = ["starts_at"]
    reference_sources = {
        "contact": "contact_id",
        "service": "service_id",
        "professional": "professional_id",
    }

    def get_queryset(self) -> QuerySet:
        f = self.filters
        return selectors.appointment_list(
            company=self.company,
            state=f.get("state"),
            contact=f.get("contact"),
            service=f.get("service"),
            professional=f.get("professional"),
            **self.date_filters(),
        )

    def get_object(self) -> Any:
        return selectors.appointment_get(company=self.company, reference=self.kwargs["reference"])

    @write_schema(s.AppointmentIn, s.AppointmentOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            company = self.company
            return appointment_book(
                company=company,
                contact=selectors.contact_get(company=company, reference=data["contact"]),
                service=selectors.service_get(company=company, reference=data["service"]),
                professional=selectors.professional_get(
                    company=company, reference=data["professional"]
                ),
                starts_at=data["starts_at"],
                created_via=Appointment.Via.INTEGRATION,
            )

        return self.write(s.AppointmentIn, perform, status=201)

    @write_schema(s.EmptyIn, s.AppointmentOut)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.EmptyIn,
            lambda data: appointment_cancel(company=self.company, reference=reference, by=self.by),
        )

    @write_schema(s.AppointmentRescheduleIn, s.AppointmentOut)
    @action(detail=True, methods=["post"])
    def reschedule(self, request: Request, reference: str) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            professional = (
                selectors.professional_get(company=self.company, reference=data["professional"])
                if "professional" in data
                else None
            )
            return appointment_reschedule(
                company=self.company,
                reference=reference,
                starts_at=data["starts_at"],
                professional=professional,
                by=self.by,
            )

        return self.write(s.AppointmentRescheduleIn, perform)

    @write_schema(s.EmptyIn, s.AppointmentOut)
    @action(detail=True, methods=["post"], url_path="mark-attended")
    def mark_attended(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.EmptyIn,
            lambda data: appointment_mark_attended(
                company=self.company, reference=reference, by=self.by
            ),
        )

    @write_schema(s.EmptyIn, s.AppointmentOut)
    @action(detail=True, methods=["post"], url_path="mark-no-show")
    def mark_no_show(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.EmptyIn,
            lambda data: appointment_mark_no_show(
                company=self.company, reference=reference, by=self.by
            ),
        )


# --- Catalog and quotes -----------------------------------------------------------------------


@extend_schema_view(
    list=read_schema(s.ProductOut(many=True), **_filters(s.ProductFilter)),
    retrieve=read_schema(s.ProductOut),
)
class ProductViewSet(ResourceViewSet):
    """The catalog with the current price list's prices and available stock, by SKU."""

    resource = "products"
    permission_model = "sales.product"
    serializer_class = s.ProductOut
    filter_class = s.ProductFilter
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
    list=read_schema(s.QuoteOut(many=True), **_filters(s.QuoteFilter)),
    retrieve=read_schema(s.QuoteOut),
)
class QuoteViewSet(ResourceViewSet):
    """Quotes, priced by the system from the catalog and the current price list; stock is
    reserved at acceptance."""

    resource = "quotes"
    permission_model = "sales.quote"
    serializer_class = s.QuoteOut
    filter_class = s.QuoteFilter
    ordering_fields = ["created_at", "valid_until"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}

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

    @write_schema(s.QuoteIn, s.QuoteOut, status=201)
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

        return self.write(s.QuoteIn, perform, status=201)

    @write_schema(s.EmptyIn, s.QuoteOut)
    @action(detail=True, methods=["post"])
    def send(self, request: Request, reference: str) -> HttpResponse:
        return self.write(s.EmptyIn, lambda data: quote_send(quote=self.get_object(), by=self.by))

    @write_schema(s.QuoteAcceptIn, s.QuoteOut)
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.QuoteAcceptIn,
            lambda data: quote_accept(
                quote=self.get_object(), expected_total=data.get("expected_total"), by=self.by
            ),
        )

    @write_schema(s.QuoteRejectIn, s.QuoteOut)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.QuoteRejectIn,
            lambda data: quote_reject(
                quote=self.get_object(), reason=data.get("reason", ""), by=self.by
            ),
        )

    @write_schema(s.EmptyIn, s.QuoteOut)
    @action(detail=True, methods=["post"])
    def expire(self, request: Request, reference: str) -> HttpResponse:
        return self.write(s.EmptyIn, lambda data: quote_expire(quote=self.get_object(), by=self.by))


# --- Opportunities ------------------------------------------------------------------------------


@extend_schema_view(
    list=read_schema(s.OpportunityOut(many=True), **_filters(s.OpportunityFilter)),
    retrieve=read_schema(s.OpportunityOut),
)
class OpportunityViewSet(ResourceViewSet):
    """The sales pipeline: new → qualified → proposal → negotiation → won / lost."""

    resource = "opportunities"
    permission_model = "sales.opportunity"
    serializer_class = s.OpportunityOut
    filter_class = s.OpportunityFilter
    ordering_fields = ["created_at", "closed_at"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}

    def get_queryset(self) -> QuerySet:
        f = self.filters
        return selectors.opportunity_list(
            company=self.company,
            state=f.get("state"),
            contact=f.get("contact"),
            **self.date_filters(),
        )

    def get_object(self) -> Any:
        return opportunity_get(company=self.company, reference=self.kwargs["reference"])

    @write_schema(s.OpportunityIn, s.OpportunityOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            return opportunity_create(
                company=self.company,
                contact=selectors.contact_get(company=self.company, reference=data["contact"]),
                title=data["title"],
                notes=data.get("notes", ""),
                amount=data.get("amount", Decimal(0)),
                currency=data["currency"].upper() if "currency" in data else None,
            )

        return self.write(s.OpportunityIn, perform, status=201)

    def _move(self, service: Callable[..., Model]) -> HttpResponse:
        return self.write(
            s.EmptyIn, lambda data: service(opportunity=self.get_object(), by=self.by)
        )

    @write_schema(s.EmptyIn, s.OpportunityOut)
    @action(detail=True, methods=["post"])
    def qualify(self, request: Request, reference: str) -> HttpResponse:
        return self._move(opportunity_qualify)

    @write_schema(s.EmptyIn, s.OpportunityOut)
    @action(detail=True, methods=["post"])
    def propose(self, request: Request, reference: str) -> HttpResponse:
        return self._move(opportunity_propose)

    @write_schema(s.EmptyIn, s.OpportunityOut)
    @action(detail=True, methods=["post"])
    def negotiate(self, request: Request, reference: str) -> HttpResponse:
        return self._move(opportunity_negotiate)

    @write_schema(s.EmptyIn, s.OpportunityOut)
    @action(detail=True, methods=["post"])
    def win(self, request: Request, reference: str) -> HttpResponse:
        return self._move(opportunity_win)

    @write_schema(s.OpportunityLoseIn, s.OpportunityOut)
    @action(detail=True, methods=["post"])
    def lose(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            s.OpportunityLoseIn,
            lambda data: opportunity_lose(
                opportunity=self.get_object(), reason=data["reason"], by=self.by
            ),
        )


# --- Cases -------------------------------------------------------------------------------------


@extend_schema_view(
    list=read_schema(s.CaseOut(many=True), **_filters(s.CaseFilter)),
    retrieve=read_schema(s.CaseOut),
)
class CaseViewSet(ResourceViewSet):
    """Support cases: open → in_progress ⇄ waiting_customer → resolved → closed (terminal)."""

    resource = "cases"
    permission_model = "support.case"
    serializer_class = s.CaseOut
    filter_class = s.CaseFilter
    ordering_fields = ["created_at", "updated_at"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}

    def get_queryset(self) -> QuerySet:
        f = self.filters
        return selectors.case_list(
            company=self.company,
            state=f.get("state"),
            contact=f.get("contact"),
            priority=f.get("priority"),
            **self.date_filters(),
        )

    def get_object(self) -> Any:
        return case_get(company=self.company, reference=self.kwargs["reference"])

    @write_schema(s.CaseIn, s.CaseOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            company = self.company
            related = (
                case_get(company=company, reference=data["related_case"])
                if "related_case" in data
                else None
            )
            return case_open(
                company=company,
                contact=selectors.contact_get(company=company, reference=data["contact"]),
                subject=data["subject"],
                description=data["description"],
                channel=data.get("channel", Case.Channel.OTHER),
                priority=data.get("priority", Case.Priority.NORMAL),
                related_case=related,
            )

        return self.write(s.CaseIn, perform, status=201)

    def _move(self, service: Callable[..., Model]) -> HttpResponse:
        return self.write(s.EmptyIn, lambda data: service(case=self.get_object(), by=self.by))

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"])
    def start(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_start)

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"], url_path="wait-for-customer")
    def wait_for_customer(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_wait_for_customer)

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_resume)

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_resolve)

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"])
    def close(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_close)

    @write_schema(s.EmptyIn, s.CaseOut)
    @action(detail=True, methods=["post"])
    def reopen(self, request: Request, reference: str) -> HttpResponse:
        return self._move(case_reopen)
