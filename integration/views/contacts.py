"""The company's contacts: listed, read and created (with its identifiers unique)."""

from typing import Any

from django.db import IntegrityError
from django.db.models import Model, QuerySet
from django.http import HttpResponse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_view
from rest_framework.request import Request

from core.errors import ValidationFailed
from core.normalize import normalize_document, normalize_email, normalize_phone
from core.services import contact_create
from integration import selectors
from integration.schema import read_schema, write_schema
from integration.serializers.contacts import ContactIn, ContactOut
from integration.serializers.filters import ContactFilter
from integration.views.base import ResourceViewSet


@extend_schema_view(
    list=read_schema(ContactOut(many=True), parameters=[ContactFilter]),
    retrieve=read_schema(ContactOut),
)
class ContactViewSet(ResourceViewSet):
    """The company's contacts (customers)."""

    resource = "contacts"
    permission_model = "core.contact"
    serializer_class = ContactOut
    filter_class = ContactFilter
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

    @write_schema(ContactIn, ContactOut, status=201)
    def create(self, request: Request) -> HttpResponse:
        def perform(data: dict[str, Any]) -> Model:
            try:
                return contact_create(company=self.company, **data)
            except IntegrityError:
                raise ValidationFailed(
                    _("Ya existe un contacto con ese documento, teléfono o correo."),
                    code="contact_exists",
                ) from None

        return self.write(ContactIn, perform, status=201)
