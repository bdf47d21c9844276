"""The base of the integration API's views: the company, its references and filters, and
the one idempotent write path every resource's viewset uses.

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

from django.db.models import Model
from django.http import HttpResponse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from core.idempotency import check_http_key, idempotent_execute
from core.models import Company
from core.outcome import Outcome, outcome_response
from core.references import normalize_reference
from integration.authentication import COMPANY_PARAMETER, IntegrationAccess
from integration.pagination import Pagination, StableOrdering
from integration.serializers.references import ReferenceBook
from integration.serializers.strict import EmptyIn

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
    # The keyword under which the resource's transition services take the record it addresses
    # (quote_send(quote=...), case_start(case=...)), for `transition`.
    transition_target = ""

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
    def references(self) -> ReferenceBook:
        return ReferenceBook(self.company)

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

    def transition(self, service: Callable[..., Model]) -> HttpResponse:
        """A transition that takes no arguments: `service` applied, by the caller, to the
        record the URL addresses, as an idempotent write."""
        return self.write(
            EmptyIn,
            lambda data: service(**{self.transition_target: self.get_object()}, by=self.by),
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
