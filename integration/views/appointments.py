"""Appointments: listed, read, booked, and moved through their transitions."""

from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request

from agenda.models import Appointment
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_mark_attended,
    appointment_mark_no_show,
    appointment_reschedule,
)
from integration import selectors
from integration.schema import read_schema, write_schema
from integration.serializers.agenda import AppointmentIn, AppointmentOut, AppointmentRescheduleIn
from integration.serializers.filters import AppointmentFilter
from integration.serializers.strict import EmptyIn
from integration.views.base import ResourceViewSet


@extend_schema_view(
    list=read_schema(AppointmentOut(many=True), parameters=[AppointmentFilter]),
    retrieve=read_schema(AppointmentOut),
)
class AppointmentViewSet(ResourceViewSet):
    """Appointments. Bookings and changes follow the customer rules (minimum notice, horizon,
    cancellation cut-off) and are re-validated at the instant; staff override in the admin."""

    resource = "appointments"
    permission_model = "agenda.appointment"
    serializer_class = AppointmentOut
    filter_class = AppointmentFilter
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

    @write_schema(AppointmentIn, AppointmentOut, status=201)
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

        return self.write(AppointmentIn, perform, status=201)

    @write_schema(EmptyIn, AppointmentOut)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            EmptyIn,
            lambda data: appointment_cancel(company=self.company, reference=reference, by=self.by),
        )

    @write_schema(AppointmentRescheduleIn, AppointmentOut)
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

        return self.write(AppointmentRescheduleIn, perform)

    @write_schema(EmptyIn, AppointmentOut)
    @action(detail=True, methods=["post"], url_path="mark-attended")
    def mark_attended(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            EmptyIn,
            lambda data: appointment_mark_attended(
                company=self.company, reference=reference, by=self.by
            ),
        )

    @write_schema(EmptyIn, AppointmentOut)
    @action(detail=True, methods=["post"], url_path="mark-no-show")
    def mark_no_show(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            EmptyIn,
            lambda data: appointment_mark_no_show(
                company=self.company, reference=reference, by=self.by
            ),
        )
