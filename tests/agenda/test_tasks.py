"""The no-show sweep: only companies that enabled it, only past their end plus the grace."""

from datetime import time, timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django_fsm_log.models import StateLog

from agenda import clock, tasks
from agenda.models import Appointment, Service
from agenda.selectors import agenda_settings_for
from agenda.services import (
    appointment_book,
    appointment_mark_attended,
    appointments_mark_no_shows,
    professional_create,
)
from config.celery import app
from core.services import contact_create
from tests.factories import MONDAY_8AM, local
from tests.row_faults import update_refused

pytestmark = pytest.mark.django_db

TUESDAY_10 = local(2026, 12, 8, 10)
AFTER = TUESDAY_10 + timedelta(minutes=30 + 60)  # its end plus the default grace


@pytest.fixture
def book(company, service, marta, ana):
    def book(starts_at=TUESDAY_10, **kwargs):
        kwargs.setdefault("company", company)
        kwargs.setdefault("contact", ana)
        kwargs.setdefault("service", service)
        kwargs.setdefault("professional", marta)
        return appointment_book(starts_at=starts_at, created_via="staff", now=MONDAY_8AM, **kwargs)

    return book


@pytest.fixture
def auto_no_show(agenda_settings):
    agenda_settings.auto_no_show = True
    agenda_settings.save()
    return agenda_settings


def state_of(appointment: Appointment) -> str:
    appointment.refresh_from_db()
    return appointment.state


def test_it_marks_an_overdue_appointment_when_the_company_enabled_it(book, auto_no_show):
    appointment = book()

    assert appointments_mark_no_shows(now=AFTER) == 1

    assert state_of(appointment) == Appointment.State.NO_SHOW
    log = StateLog.objects.get(
        content_type=ContentType.objects.get_for_model(Appointment), object_id=appointment.pk
    )
    assert (log.transition, log.by) == ("mark_no_show", None)


def test_it_waits_for_the_grace_after_the_end(book, auto_no_show):
    appointment = book()

    assert appointments_mark_no_shows(now=AFTER - timedelta(minutes=1)) == 0

    assert state_of(appointment) == Appointment.State.SCHEDULED


def test_it_leaves_companies_that_did_not_enable_it_alone(book, agenda_settings):
    appointment = book()

    assert appointments_mark_no_shows(now=AFTER + timedelta(days=3)) == 0

    assert state_of(appointment) == Appointment.State.SCHEDULED


def test_it_leaves_attended_and_other_companies_appointments_alone(
    book, auto_no_show, company, other_company
):
    attended = book()
    appointment_mark_attended(
        company=company, reference=attended.reference, now=TUESDAY_10 + timedelta(minutes=5)
    )
    agenda_settings_for(company=other_company)  # defaults: disabled
    service = Service.objects.create(company=other_company, name="Radiografía")
    professional = professional_create(
        company=other_company,
        display_name="Dr. Vidal",
        services=[service],
        weekly_hours=[(1, time(9), time(13))],
    )
    theirs = book(
        company=other_company,
        contact=contact_create(company=other_company, first_name="Eva", email="e@example.com"),
        service=service,
        professional=professional,
    )

    assert appointments_mark_no_shows(now=AFTER) == 0

    assert state_of(attended) == Appointment.State.ATTENDED
    assert state_of(theirs) == Appointment.State.SCHEDULED


def test_the_task_runs_the_sweep_with_the_agenda_clock(book, auto_no_show, monkeypatch):
    appointment = book()
    monkeypatch.setattr(clock, "now", lambda: AFTER)

    tasks.appointments_mark_no_shows_task.delay()

    assert state_of(appointment) == Appointment.State.NO_SHOW


def test_the_sweep_is_on_the_beat_schedule():
    app.loader.import_default_modules()
    app.finalize()

    entry = app.conf.beat_schedule[tasks.NO_SHOW_TASK_NAME]
    assert entry["task"] == tasks.NO_SHOW_TASK_NAME
    assert entry["schedule"] == tasks.NO_SHOW_EVERY_SECONDS


@pytest.mark.postgres
def test_one_appointment_that_fails_leaves_the_others_marked_and_stays_due(
    book, auto_no_show, caplog
):
    failing = book()
    other = book(starts_at=TUESDAY_10 + timedelta(hours=1))
    later = AFTER + timedelta(hours=1)

    with update_refused(failing):
        assert appointments_mark_no_shows(now=later) == 1

    assert (state_of(failing), state_of(other)) == (
        Appointment.State.SCHEDULED,
        Appointment.State.NO_SHOW,
    )
    assert f"sweep agenda.no_shows: row (<Company: {failing.company}>, '{failing.reference}')" in (
        caplog.text
    )
    assert appointments_mark_no_shows(now=later) == 1  # the next run marks it
    assert state_of(failing) == Appointment.State.NO_SHOW
