"""Agenda fixtures: a hair salon in Madrid with one service, one professional and two customers."""

from datetime import datetime, time
from zoneinfo import ZoneInfo

import pytest

from agenda.models import AgendaSettings, Professional, Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.models import Company, Contact
from core.services import contact_create

MADRID = ZoneInfo("Europe/Madrid")
WEEKDAYS = range(5)


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """An aware instant from Madrid wall-clock time."""
    return datetime(year, month, day, hour, minute, tzinfo=MADRID)


# Monday 7 December 2026, 08:00 in Madrid: the fixed "now" of most tests.
MONDAY_8AM = local(2026, 12, 7, 8)


@pytest.fixture
def agenda_settings(company: Company) -> AgendaSettings:
    settings = agenda_settings_for(company=company)
    settings.minimum_notice_minutes = 60
    settings.booking_horizon_days = 60
    settings.slot_step_minutes = 30
    settings.cancellation_cutoff_minutes = 120
    settings.save()
    return settings


@pytest.fixture
def service(company: Company, agenda_settings: AgendaSettings) -> Service:
    return Service.objects.create(
        company=company, name="Corte de pelo", duration_minutes=30, buffer_after_minutes=10
    )


@pytest.fixture
def marta(company: Company, service: Service) -> Professional:
    """Works Monday to Friday, 09:00-13:00 and 15:00-19:00."""
    return professional_create(
        company=company,
        display_name="Marta",
        services=[service],
        weekly_hours=[(d, time(9), time(13)) for d in WEEKDAYS]
        + [(d, time(15), time(19)) for d in WEEKDAYS],
    )


@pytest.fixture
def customer(company: Company) -> Contact:
    return contact_create(
        company=company,
        first_name="Ana",
        last_name="García",
        document_number="12345678Z",
        phone="+34600111222",
    )


@pytest.fixture
def other_customer(company: Company) -> Contact:
    return contact_create(
        company=company, first_name="Bruno", document_number="X1234567L", phone="+34600333444"
    )
