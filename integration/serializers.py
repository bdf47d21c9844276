"""Request and response shapes of the integration API. Inputs are strict (unknown fields are
refused, nothing is defaulted, so an omitted field stays omitted in the idempotency
fingerprint); outputs carry public references and customer-facing names, never primary keys,
internal notes or tokens."""

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.drainage import set_override
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from agenda.models import CUSTOMER_STATE_LABELS as APPOINTMENT_STATE_LABELS
from agenda.models import Appointment
from core.references import normalize_reference
from core.states import StateLabels, state_shown
from integration.services import REFERENCE_KINDS, public_references_assign
from sales import money
from sales.models import Opportunity, Quote
from sales.services import (
    MAX_LINE_QUANTITY,
    MAX_QUOTE_LINES,
    OPPORTUNITY_STATE_LABELS,
    QUOTE_STATE_LABELS,
)
from support.models import CUSTOMER_STATE_LABELS as CASE_STATE_LABELS
from support.models import Case

REFERENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


# --- Building blocks ---------------------------------------------------------------------------


class ReferenceBook:
    """The public references of contacts, services and professionals one response shows,
    looked up (and drawn the first time) in one query per kind."""

    def __init__(self, company: Any) -> None:
        self.company = company
        self._known: dict[str, dict[int, str]] = {kind: {} for kind in REFERENCE_KINDS}

    def prefetch(self, kind: str, ids: Any) -> None:
        missing = {pk for pk in ids if pk is not None} - self._known[kind].keys()
        if missing:
            self._known[kind].update(
                public_references_assign(company=self.company, kind=kind, ids=missing)
            )

    def get(self, kind: str, pk: int | None) -> str | None:
        if pk is None:
            return None
        self.prefetch(kind, [pk])
        return self._known[kind].get(pk)


@extend_schema_field({"type": "string", "example": "CT-7K2F9Q"})
class ReferenceField(serializers.Field):
    """The public reference of a contact, service or professional (from `source`, an id)."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        self.kind = kind
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: int) -> str | None:
        return self.context["references"].get(self.kind, value)


@extend_schema_field({"type": "string", "example": "53.33"})
class MoneyField(serializers.Field):
    """An amount as a string with exactly its currency's decimals (the `currency` attribute of
    the same object)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def get_attribute(self, instance: Any) -> tuple[Decimal | None, str]:
        return super().get_attribute(instance), instance.currency

    def to_representation(self, value: tuple[Decimal | None, str]) -> str | None:
        amount, currency = value
        return None if amount is None else money.to_wire(amount, currency)


@extend_schema_field({"type": "string", "example": "cancelada"})
class StateLabelField(serializers.Field):
    """The state as the customer reads it, in the company's language (next to `state`)."""

    def __init__(self, labels: StateLabels, **kwargs: Any) -> None:
        self.labels = labels
        kwargs["read_only"] = True
        kwargs.setdefault("source", "state")
        super().__init__(**kwargs)

    def to_representation(self, value: str) -> str:
        return state_shown(value, self.labels)["state_label"]


def _quote_state_now(quote: Quote) -> str:
    """A quote's state at this instant: an open quote past its validity is expired even
    before the beat task records it (as the sales services and the tools read it)."""
    return quote.effective_state(timezone.now())


class QuoteStateField(serializers.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=Quote.State.choices, source="*", read_only=True, **kwargs)

    def to_representation(self, quote: Quote) -> str:
        return _quote_state_now(quote)


class QuoteStateLabelField(StateLabelField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(QUOTE_STATE_LABELS, source="*", **kwargs)

    def to_representation(self, quote: Quote) -> str:
        return super().to_representation(_quote_state_now(quote))


class DecimalInput(serializers.DecimalField):
    """A non-negative amount given as a JSON string of plain digits ("53.33"), as the document
    says: DRF alone would also take a number, an exponent ("1e2"), spaces or a sign."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=Decimal(0), **kwargs)
        whole = self.max_digits - self.decimal_places
        self.pattern = rf"^[0-9]{{1,{whole}}}(?:\.[0-9]{{1,{self.decimal_places}}})?$"
        set_override(
            self,
            "field",
            {"type": "string", "format": "decimal", "pattern": self.pattern, "example": "53.33"},
        )

    def to_internal_value(self, data: Any) -> Decimal:
        if not isinstance(data, str) or not re.fullmatch(self.pattern, data):
            self.fail("invalid")
        return super().to_internal_value(data)


# The JSON type each kind of input field takes (DRF would turn 0 into "0", "1" into 1 and
# "yes" into true): a body that does not match its document is refused, not coerced.
_JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...]], ...] = (
    (serializers.BooleanField, (bool,)),
    (serializers.IntegerField, (int,)),
    (serializers.CharField, (str,)),
    (serializers.ChoiceField, (str,)),
    (serializers.DateTimeField, (str,)),
    (serializers.DateField, (str,)),
)


def _has_json_type(field: serializers.Field, value: Any) -> bool:
    if value is None:
        return True  # the field's allow_null decides
    for kind, types in _JSON_TYPES:
        if isinstance(field, kind):
            return isinstance(value, types) and not (bool not in types and type(value) is bool)
    return True


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo is an error rather than silently ignored,
    and values of another JSON type than the field's (strings are strings)."""

    default_error_messages = {"wrong_type": _("Este valor no es del tipo esperado.")}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [_("Este campo no existe.")] for name in unknown}
                )
            mistyped = sorted(
                name
                for name, field in self.fields.items()
                if name in data and not field.read_only and not _has_json_type(field, data[name])
            )
            if mistyped:
                message = self.error_messages["wrong_type"]
                raise serializers.ValidationError({name: [message] for name in mistyped})
        return super().to_internal_value(data)


LOCAL_TIME_HELP = "ISO 8601; without an offset it is the company's local time."


class InstantField(serializers.DateTimeField):
    """An instant in ISO 8601 (without an offset: the company's local time), within years
    FIRST_YEAR..LAST_YEAR: services add durations to it and the fingerprint reads it in UTC,
    which near the calendar's ends would overflow (answered as an outage, not as bad input)."""

    FIRST_YEAR = 1900
    LAST_YEAR = 9998
    default_error_messages = {"invalid_date": _("Esa fecha está fuera del rango admitido.")}

    def to_internal_value(self, value: Any) -> datetime:
        try:
            instant = super().to_internal_value(value)
            in_utc = instant.astimezone(UTC)
        except OverflowError:
            self.fail("invalid_date")
        except serializers.ValidationError as error:
            if error.get_codes() == ["overflow"]:  # DRF's own: in the company's zone
                self.fail("invalid_date")
            raise
        if not self.FIRST_YEAR <= in_utc.year <= self.LAST_YEAR:
            self.fail("invalid_date")
        return instant


class ReferenceInput(serializers.RegexField):
    """A public reference given in a body (e.g. "AP-7K2F9Q"), stored upper-case."""

    def __init__(self, example: str, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 32)
        kwargs.setdefault("help_text", f"Public reference, e.g. {example}.")
        super().__init__(REFERENCE_PATTERN, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        return normalize_reference(super().to_internal_value(data))


class EmptyIn(StrictSerializer):
    """A transition that takes no arguments (an empty JSON object, or no body)."""


# --- Errors (documentation of the one error shape) --------------------------------------------


class FieldErrorOut(serializers.Serializer):
    field = serializers.CharField()
    problem = serializers.CharField()


class ErrorOut(serializers.Serializer):
    error_type = serializers.ChoiceField(
        choices=["VALIDATION", "NOT_FOUND", "PERMISSION", "AMBIGUOUS", "CONFLICT", "SYSTEM"]
    )
    user_message = serializers.CharField(help_text="For the end customer, in Spanish.")
    code = serializers.CharField(help_text="Stable machine code, e.g. invalid_idempotency_key.")
    errors = FieldErrorOut(many=True, required=False)
    state = serializers.CharField(required=False)
    retry_after_seconds = serializers.IntegerField(required=False)


# --- Query filters ----------------------------------------------------------------------------


class QueryFilter(serializers.Serializer):
    """Query parameters. Others (ordering, limit, offset) share the query string, so unknown
    ones are not refused here."""


# The last day a range may end on: the selectors search up to the start of the next day.
LAST_DAY = date.max - timedelta(days=1)


class DateRangeFilter(QueryFilter):
    date_from = serializers.DateField(
        required=False, help_text="First local day (YYYY-MM-DD), inclusive."
    )
    date_to = serializers.DateField(
        required=False, help_text="Last local day (YYYY-MM-DD), inclusive."
    )

    def validate_date_to(self, value: date) -> date:
        if value > LAST_DAY:
            raise serializers.ValidationError(
                _("Esa fecha está fuera del rango admitido."), code="invalid_date"
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_to"] < attrs["date_from"]:
            raise serializers.ValidationError(
                {"date_to": [_("Es anterior a date_from.")]}, code="invalid_date_range"
            )
        return attrs


class ContactFilter(DateRangeFilter):
    search = serializers.CharField(required=False, max_length=100, help_text="Name words.")
    email = serializers.CharField(required=False, max_length=254)
    phone = serializers.CharField(required=False, max_length=40)
    document_number = serializers.CharField(required=False, max_length=32)


class ServiceFilter(QueryFilter):
    active = serializers.BooleanField(required=False)


class ProfessionalFilter(ServiceFilter):
    service = ReferenceInput("SV-7K2F9Q", required=False)


class ProductFilter(ServiceFilter):
    search = serializers.CharField(required=False, max_length=100)


class SlotFilter(DateRangeFilter):
    """date_from defaults to today; date_to to two weeks later; at most 31 days are searched
    (has_more is true when `limit` cut the answer, and when a longer range was cut to 31 days:
    search again from date_from + 31 days)."""

    service = ReferenceInput("SV-7K2F9Q")
    professional = ReferenceInput("PR-7K2F9Q", required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100)


class AppointmentFilter(DateRangeFilter):
    state = serializers.ChoiceField(choices=Appointment.State.choices, required=False)
    contact = ReferenceInput("CT-7K2F9Q", required=False)
    service = ReferenceInput("SV-7K2F9Q", required=False)
    professional = ReferenceInput("PR-7K2F9Q", required=False)


class QuoteFilter(DateRangeFilter):
    state = serializers.ChoiceField(choices=Quote.State.choices, required=False)
    contact = ReferenceInput("CT-7K2F9Q", required=False)


class OpportunityFilter(DateRangeFilter):
    state = serializers.ChoiceField(choices=Opportunity.State.choices, required=False)
    contact = ReferenceInput("CT-7K2F9Q", required=False)


class CaseFilter(DateRangeFilter):
    state = serializers.ChoiceField(choices=Case.State.choices, required=False)
    priority = serializers.ChoiceField(choices=Case.Priority.choices, required=False)
    contact = ReferenceInput("CT-7K2F9Q", required=False)


# --- Contacts, services, professionals, slots ------------------------------------------------


class ContactOut(serializers.Serializer):
    reference = ReferenceField("contact", source="pk")
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    document_number = serializers.CharField()
    phone = serializers.CharField(help_text="E.164")
    email = serializers.CharField()
    created_at = serializers.DateTimeField()


class ContactIn(StrictSerializer):
    first_name = serializers.CharField(max_length=100)
    last_name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    document_number = serializers.CharField(max_length=32, required=False, allow_blank=True)
    phone = serializers.CharField(max_length=40, required=False, allow_blank=True)
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True)


class ServiceOut(serializers.Serializer):
    reference = ReferenceField("service", source="pk")
    name = serializers.CharField()
    description = serializers.CharField()
    duration_minutes = serializers.IntegerField()
    buffer_before_minutes = serializers.IntegerField()
    buffer_after_minutes = serializers.IntegerField()
    active = serializers.BooleanField()


class ProfessionalOut(serializers.Serializer):
    reference = ReferenceField("professional", source="pk")
    display_name = serializers.CharField()
    active = serializers.BooleanField()
    services = serializers.SerializerMethodField()

    @extend_schema_field({"type": "array", "items": {"type": "string"}})
    def get_services(self, professional: Any) -> list[str]:
        book: ReferenceBook = self.context["references"]
        ids = [s.pk for s in professional.services.all()]
        book.prefetch("service", ids)
        return [book.get("service", pk) for pk in ids]


class SlotOut(serializers.Serializer):
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    date = serializers.CharField(help_text="Local date, YYYY-MM-DD.")
    weekday = serializers.CharField(help_text="Local weekday name.")
    time = serializers.CharField(help_text="Local time, HH:MM.")
    professional = ReferenceField("professional", source="professional.pk")
    professional_name = serializers.CharField(source="professional.display_name")


@extend_schema_serializer(many=False)  # the list action answers one object around its slots
class SlotListOut(serializers.Serializer):
    service = serializers.CharField()
    results = SlotOut(many=True)
    has_more = serializers.BooleanField()


# --- Appointments ------------------------------------------------------------------------------


class AppointmentOut(serializers.Serializer):
    reference = serializers.CharField()
    state = serializers.ChoiceField(choices=Appointment.State.choices)
    state_label = StateLabelField(APPOINTMENT_STATE_LABELS)
    contact = ReferenceField("contact", source="contact_id")
    service = ReferenceField("service", source="service_id")
    service_name = serializers.CharField(source="service.name")
    professional = ReferenceField("professional", source="professional_id")
    professional_name = serializers.CharField(source="professional.display_name")
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    created_via = serializers.ChoiceField(choices=Appointment.Via.choices)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class AppointmentIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    service = ReferenceInput("SV-7K2F9Q")
    professional = ReferenceInput("PR-7K2F9Q")
    starts_at = InstantField(help_text=LOCAL_TIME_HELP)


class AppointmentRescheduleIn(StrictSerializer):
    starts_at = InstantField(help_text=LOCAL_TIME_HELP)
    professional = ReferenceInput("PR-7K2F9Q", required=False)


# --- Catalog and quotes ------------------------------------------------------------------------


class ProductOut(serializers.Serializer):
    sku = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    unit = serializers.CharField()
    tax_rate = serializers.DecimalField(max_digits=5, decimal_places=2)
    active = serializers.BooleanField()
    unit_price = serializers.SerializerMethodField()
    currency = serializers.SerializerMethodField()
    track_stock = serializers.BooleanField()
    quantity_available = serializers.SerializerMethodField()

    @extend_schema_field({"type": "string", "nullable": True, "example": "12.50"})
    def get_unit_price(self, product: Any) -> str | None:
        price = getattr(product, "unit_price", None)
        currency = self.context.get("currency")
        return None if price is None or currency is None else money.to_wire(price, currency)

    @extend_schema_field({"type": "string", "nullable": True, "example": "EUR"})
    def get_currency(self, product: Any) -> str | None:
        return self.context.get("currency")

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_quantity_available(self, product: Any) -> int | None:
        return product.quantity_available if product.track_stock else None


class QuoteLineOut(serializers.Serializer):
    sku = serializers.CharField()
    name = serializers.CharField()
    quantity = serializers.IntegerField()
    unit_price = serializers.SerializerMethodField()
    tax_rate = serializers.DecimalField(max_digits=5, decimal_places=2)
    subtotal = serializers.SerializerMethodField()
    tax = serializers.SerializerMethodField()
    total = serializers.SerializerMethodField()

    def _money(self, amount: Decimal) -> str:
        return money.to_wire(amount, self.context["currency"])

    @extend_schema_field(OpenApiTypes.STR)
    def get_unit_price(self, line: Any) -> str:
        return self._money(line.unit_price)

    @extend_schema_field(OpenApiTypes.STR)
    def get_subtotal(self, line: Any) -> str:
        return self._money(line.subtotal)

    @extend_schema_field(OpenApiTypes.STR)
    def get_tax(self, line: Any) -> str:
        return self._money(line.tax)

    @extend_schema_field(OpenApiTypes.STR)
    def get_total(self, line: Any) -> str:
        return self._money(line.total)


class QuoteOut(serializers.Serializer):
    reference = serializers.CharField()
    state = QuoteStateField()
    state_label = QuoteStateLabelField()
    contact = ReferenceField("contact", source="contact_id")
    opportunity = serializers.CharField(source="opportunity.reference", allow_null=True)
    currency = serializers.CharField()
    subtotal = MoneyField()
    tax_total = MoneyField()
    total = MoneyField()
    valid_until = serializers.DateTimeField()
    lines = serializers.SerializerMethodField()
    rejection_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(QuoteLineOut(many=True))
    def get_lines(self, quote: Quote) -> list[dict[str, Any]]:
        context = {**self.context, "currency": quote.currency}
        return QuoteLineOut(quote.lines.all(), many=True, context=context).data


class QuoteItemIn(StrictSerializer):
    sku = serializers.CharField(max_length=64)
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_LINE_QUANTITY)


class ExpectedTotal(DecimalInput):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "The total (tax included) the caller believes; refused with the real one if not.",
        )
        super().__init__(max_digits=17, decimal_places=3, required=False, **kwargs)


class QuoteIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    # A ListField, not many=True, so that the document states its bounds (minItems, maxItems).
    items = serializers.ListField(child=QuoteItemIn(), min_length=1, max_length=MAX_QUOTE_LINES)
    expected_total = ExpectedTotal()
    opportunity = ReferenceInput("OP-7K2F9Q", required=False)
    send = serializers.BooleanField(
        required=False, help_text="Send it at once (default true); false keeps a draft."
    )


class QuoteAcceptIn(StrictSerializer):
    expected_total = ExpectedTotal()


class QuoteRejectIn(StrictSerializer):
    reason = serializers.CharField(max_length=300, required=False, allow_blank=True)


# --- Opportunities -----------------------------------------------------------------------------


class OpportunityOut(serializers.Serializer):
    reference = serializers.CharField()
    state = serializers.ChoiceField(choices=Opportunity.State.choices)
    state_label = StateLabelField(OPPORTUNITY_STATE_LABELS)
    contact = ReferenceField("contact", source="contact_id")
    title = serializers.CharField()
    notes = serializers.CharField()
    amount = MoneyField()
    currency = serializers.CharField()
    lost_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)


class OpportunityIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    title = serializers.CharField(max_length=200)
    notes = serializers.CharField(max_length=4000, required=False, allow_blank=True)
    amount = DecimalInput(
        max_digits=money.STORED_MAX_DIGITS,
        decimal_places=money.STORED_DECIMAL_PLACES,
        required=False,
    )
    currency = serializers.RegexField(r"^[A-Za-z]{3}$", required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The service rounds the amount to the currency (half up), which may carry it past
        # what the column holds: refused here as bad input, not left to the database.
        if "amount" in attrs:
            currency = attrs.get("currency") or self.context["company"].currency
            if money.quantize(attrs["amount"], currency) >= money.STORED_AMOUNT_LIMIT:
                raise serializers.ValidationError(
                    {"amount": [_("El importe supera el máximo que podemos registrar.")]},
                    code="amount_too_large",
                )
        return attrs


class OpportunityLoseIn(StrictSerializer):
    reason = serializers.CharField(max_length=300)


# --- Cases -------------------------------------------------------------------------------------


class CaseOut(serializers.Serializer):
    reference = serializers.CharField()
    state = serializers.ChoiceField(choices=Case.State.choices)
    state_label = StateLabelField(CASE_STATE_LABELS)
    contact = ReferenceField("contact", source="contact_id")
    subject = serializers.CharField()
    description = serializers.CharField()
    channel = serializers.ChoiceField(choices=Case.Channel.choices)
    priority = serializers.ChoiceField(choices=Case.Priority.choices)
    related_case = serializers.CharField(source="related_case.reference", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)


class CaseIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    subject = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=4000)
    channel = serializers.ChoiceField(choices=Case.Channel.choices, required=False)
    priority = serializers.ChoiceField(choices=Case.Priority.choices, required=False)
    related_case = ReferenceInput("CS-7K2F9Q", required=False)
