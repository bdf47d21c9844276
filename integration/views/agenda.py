"""Services, professionals and their free slots: read only (staff manage them in the
admin)."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from agenda import clock
from agenda.availability import (
    SearchWindow,
    Slot,
    describe_instant,
    search_window,
    slots_available,
)
from agenda.models import Service
from integration import selectors
from integration.schema import read_schema
from integration.serializers.agenda import ProfessionalOut, ServiceOut, SlotListOut, SlotOut
from integration.serializers.filters import ActiveFilter, ProfessionalFilter, SlotFilter
from integration.views.base import CompanyViewSet, ResourceViewSet


@extend_schema_view(
    list=read_schema(ServiceOut(many=True), parameters=[ActiveFilter]),
    retrieve=read_schema(ServiceOut),
)
class ServiceViewSet(ResourceViewSet):
    """Bookable services (managed by staff in the admin)."""

    resource = "services"
    permission_model = "agenda.service"
    serializer_class = ServiceOut
    filter_class = ActiveFilter
    ordering_fields = ["name", "duration_minutes"]
    ordering = ["name"]
    reference_sources = {"service": "pk"}

    def get_queryset(self) -> QuerySet:
        return selectors.service_list(company=self.company, active=self.filters.get("active"))

    def get_object(self) -> Any:
        return selectors.service_get(company=self.company, reference=self.kwargs["reference"])


@extend_schema_view(
    list=read_schema(ProfessionalOut(many=True), parameters=[ProfessionalFilter]),
    retrieve=read_schema(ProfessionalOut),
)
class ProfessionalViewSet(ResourceViewSet):
    """Professionals and the services they give (managed by staff in the admin)."""

    resource = "professionals"
    permission_model = "agenda.professional"
    serializer_class = ProfessionalOut
    filter_class = ProfessionalFilter
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


@extend_schema_view(list=read_schema(SlotListOut, parameters=[SlotFilter]))
class SlotViewSet(CompanyViewSet):
    """Free start times of a service, soonest first, validated again when booking."""

    resource = "slots"
    permission_model = "agenda.appointment"
    serializer_class = SlotOut
    filter_class = SlotFilter
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
        window = self.days_to_search(now)
        limit = f.get("limit", 20)
        found = slots_available(
            company=company,
            service=service,
            starts_at=window.start,
            ends_at=window.end,
            now=now,
            professional=professional,
            limit=limit + 1,
            explain_horizon=True,
        )
        # One more than the limit is searched for, to tell whether the limit cut the answer; a
        # range longer than a search covers was narrowed: more may exist after it.
        has_more = len(found) > limit or window.narrowed
        return Response(self.slots_body(service, found, limit, has_more=has_more))

    def days_to_search(self, now: datetime) -> SearchWindow:
        """The days to search: date_from (default today, the company's) to date_to."""
        first_day = self.filters.get("date_from") or now.astimezone(self.company.tz).date()
        last_day = self.filters.get("date_to")
        return search_window(
            company=self.company,
            from_text=first_day.isoformat(),
            to_text=last_day.isoformat() if last_day else None,
            now=now,
        )

    def slots_body(
        self, service: Service, found: Sequence[Slot], limit: int, *, has_more: bool
    ) -> dict[str, Any]:
        tz = self.company.tz
        slots = [
            {
                "starts_at": slot.starts_at,
                "ends_at": slot.ends_at,
                **describe_instant(slot.starts_at, tz),
                "professional": slot.professional,
            }
            for slot in found[:limit]
        ]
        self.references.prefetch("professional", [slot.professional.pk for slot in found])
        return {
            "service": self.references.get("service", service.pk),
            "results": SlotOut(slots, many=True, context=self.get_serializer_context()).data,
            "has_more": has_more,
        }
