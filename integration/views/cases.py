"""Support cases: listed, read, opened and moved through their states."""

from typing import Any

from django.db.models import Model, QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema_view
from rest_framework.decorators import action
from rest_framework.request import Request

from integration import selectors
from integration.schema import read_schema, write_schema
from integration.serializers.filters import CaseFilter
from integration.serializers.strict import EmptyIn
from integration.serializers.support import CaseIn, CaseOut
from integration.views.base import ResourceViewSet
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


@extend_schema_view(
    list=read_schema(CaseOut(many=True), parameters=[CaseFilter]),
    retrieve=read_schema(CaseOut),
)
class CaseViewSet(ResourceViewSet):
    """Support cases: open → in_progress ⇄ waiting_customer → resolved → closed (terminal)."""

    resource = "cases"
    permission_model = "support.case"
    serializer_class = CaseOut
    filter_class = CaseFilter
    ordering_fields = ["created_at", "updated_at"]
    ordering = ["-created_at"]
    reference_sources = {"contact": "contact_id"}
    transition_target = "case"

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

    @write_schema(CaseIn, CaseOut, status=201)
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

        return self.write(CaseIn, perform, status=201)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"])
    def start(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_start)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"], url_path="wait-for-customer")
    def wait_for_customer(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_wait_for_customer)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_resume)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_resolve)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"])
    def close(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_close)

    @write_schema(EmptyIn, CaseOut)
    @action(detail=True, methods=["post"])
    def reopen(self, request: Request, reference: str) -> HttpResponse:
        return self.transition(case_reopen)
