"""Reads of the agenda."""

from django.db.models import QuerySet

from agenda.models import Service
from core.models import Company


def service_list(*, company: Company, active_only: bool = True) -> QuerySet[Service]:
    services = Service.objects.filter(company=company)
    if active_only:
        services = services.filter(active=True)
    return services.order_by("name", "pk")
