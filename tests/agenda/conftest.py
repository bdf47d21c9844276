"""Agenda fixtures: the salon's booking rules, its service and Marta, who works weekdays."""

import pytest

from agenda.models import AgendaSettings, Professional, Service
from agenda.selectors import agenda_settings_for
from core.models import Company
from tests import factories


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
    return factories.service(company)


@pytest.fixture
def marta(company: Company, service: Service) -> Professional:
    """Works Monday to Friday, 09:00-13:00 and 15:00-19:00."""
    return factories.marta(company, service)
