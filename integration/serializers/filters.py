"""Query parameters of the lists: each list's filters, validated before any query runs."""

from datetime import date, timedelta
from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

from agenda.models import Appointment
from integration.serializers.references import ReferenceInput
from sales.models import Opportunity, Quote
from support.models import Case


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


class ActiveFilter(QueryFilter):
    """What staff switch on and off in the admin: services (this filter alone), professionals
    and products (with their own filters besides)."""

    active = serializers.BooleanField(required=False)


class ProfessionalFilter(ActiveFilter):
    service = ReferenceInput("SV-7K2F9Q", required=False)


class ProductFilter(ActiveFilter):
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
