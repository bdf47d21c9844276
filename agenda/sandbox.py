"""Agenda data for the declared sandbox (see core's seed_sandbox command)."""

from agenda.models import Service
from core.models import Company

SERVICES = [
    {"name": "Corte de pelo", "duration_minutes": 30, "buffer_after_minutes": 10},
    {"name": "Tinte", "duration_minutes": 90, "buffer_after_minutes": 15},
    {"name": "Consulta de asesoría", "duration_minutes": 45},
]


def seed(company: Company) -> None:
    for data in SERVICES:
        Service.objects.get_or_create(company=company, name=data["name"], defaults=data)
