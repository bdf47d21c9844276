"""The sales pipeline's opportunities: listed, read, created and moved along it."""

from decimal import Decimal
from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request

from integration import selectors
from integration.schema import read_schema, write_schema
from integration.serializers.filters import OpportunityFilter
from integration.serializers.sales import OpportunityIn, OpportunityLoseIn, OpportunityOut
from integration.serializers.strict import EmptyIn
from integration.views.base import ResourceViewSet
from sales.selectors import opportunity_get
from sales.services import (
    opportunity_create,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
)


@extend_schema_view(
    list=read_schema(OpportunityOut(many=True), parameters=[OpportunityFilter]),
    retrieve=read_schema(OpportunityOut),
)
class OpportunityViewSet(ResourceViewSet):
    """The sales pipeline: new → qualified → proposal → negotiation → won / lost."""

    resource = "opportunities"
    permission_model = "sales.opportunity"
    serializer_class = OpportunityOut
    filter_class = OpportunityFilter
    ordering_fields = ["created_at", "closed_at"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}
    transition_target = "opportunity"

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

    @write_schema(OpportunityIn, OpportunityOut, status=201)
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

        return self.write(OpportunityIn, perform, status=201)

    @write_schema(EmptyIn, OpportunityOut)
    @action(detail=True, methods=["post"])
    def qualify(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(opportunity_qualify)

    @write_schema(EmptyIn, OpportunityOut)
    @action(detail=True, methods=["post"])
    def propose(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(opportunity_propose)

    @write_schema(EmptyIn, OpportunityOut)
    @action(detail=True, methods=["post"])
    def negotiate(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(opportunity_negotiate)

    @write_schema(EmptyIn, OpportunityOut)
    @action(detail=True, methods=["post"])
    def win(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(opportunity_win)

    @write_schema(OpportunityLoseIn, OpportunityOut)
    @action(detail=True, methods=["post"])
    def lose(self, request: Request, reference: str) -> HttpResponse:
        return self.write(
            OpportunityLoseIn,
            lambda data: opportunity_lose(
                opportunity=self.get_object(), reason=data["reason"], by=self.by
            ),
        )
