"""Services, professionals, free slots and appointments."""

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from agenda.models import CUSTOMER_STATE_LABELS as APPOINTMENT_STATE_LABELS
from agenda.models import Appointment
from integration.serializers.fields import LOCAL_TIME_HELP, InstantField, StateLabelField
from integration.serializers.references import ReferenceBook, ReferenceField, ReferenceInput
from integration.serializers.strict import StrictSerializer


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
