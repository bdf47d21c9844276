"""The sandbox agenda: bookable professionals and terminal-state appointments to try guards on."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from agenda import clock, sandbox
from agenda.availability.search import slots_available
from agenda.models import Appointment, Professional, Service
from core.models import Company
from core.services import contact_create
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT

pytestmark = pytest.mark.django_db


@pytest.fixture
def sandbox_company(company):
    contact_create(company=company, first_name="Ana", document_number=ANA_DOCUMENT)
    contact_create(company=company, first_name="Bruno", document_number=BRUNO_DOCUMENT)
    return company


def test_it_seeds_professionals_who_can_be_booked(sandbox_company):
    sandbox.seed(sandbox_company)

    assert set(Professional.objects.values_list("display_name", flat=True)) == {"Marta", "Luis"}
    haircut = Service.objects.get(name="Corte de pelo")
    now = clock.now()
    assert slots_available(
        company=sandbox_company,
        service=haircut,
        starts_at=now,
        ends_at=now + timedelta(days=7),
        now=now,
        limit=1,
    )


def test_every_sandbox_contact_has_an_attended_and_a_cancelled_appointment(sandbox_company):
    sandbox.seed(sandbox_company)

    for contact in sandbox_company.contacts.all():
        states = sorted(contact.appointments.values_list("state", flat=True))
        assert states == [Appointment.State.ATTENDED, Appointment.State.CANCELLED]
    attended = Appointment.objects.filter(state=Appointment.State.ATTENDED)
    assert all(a.ends_at < clock.now() for a in attended)


def test_seeding_twice_changes_nothing(sandbox_company):
    sandbox.seed(sandbox_company)
    before = sorted(Appointment.objects.values_list("reference", "state"))

    sandbox.seed(sandbox_company)

    assert sorted(Appointment.objects.values_list("reference", "state")) == before
    assert Professional.objects.count() == 2


def test_the_seed_sandbox_command_includes_the_agenda():
    call_command("seed_sandbox", stdout=io.StringIO())

    company = Company.objects.get(slug="sandbox")
    assert company.professionals.count() == 2
    assert company.appointments.filter(state=Appointment.State.CANCELLED).count() == 2
