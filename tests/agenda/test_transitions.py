"""Every appointment transition from every state: allowed ones act, forbidden ones say why."""

from datetime import timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.utils import translation
from django_fsm import TransitionNotAllowed
from django_fsm_log.models import StateLog

from agenda.models import Appointment
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_mark_attended,
    appointment_mark_no_show,
    appointment_reschedule,
)
from core.errors import ValidationFailed
from tests.factories import MONDAY_8AM, local

pytestmark = pytest.mark.django_db

TUESDAY_10 = local(2026, 12, 8, 10)
WEDNESDAY_11 = local(2026, 12, 9, 11)
DURING = TUESDAY_10 + timedelta(minutes=5)

SCHEDULED, CANCELLED, ATTENDED, NO_SHOW = (
    Appointment.State.SCHEDULED,
    Appointment.State.CANCELLED,
    Appointment.State.ATTENDED,
    Appointment.State.NO_SHOW,
)


def act(action: str, appointment: Appointment) -> Appointment:
    company, reference = appointment.company, appointment.reference
    if action == "cancel":
        return appointment_cancel(company=company, reference=reference, now=MONDAY_8AM)
    if action == "reschedule":
        return appointment_reschedule(
            company=company, reference=reference, starts_at=WEDNESDAY_11, now=MONDAY_8AM
        )
    if action == "mark_attended":
        return appointment_mark_attended(company=company, reference=reference, now=DURING)
    return appointment_mark_no_show(company=company, reference=reference, now=DURING)


@pytest.fixture
def appointment_in(company, service, marta, ana):
    def make(state: str) -> Appointment:
        appointment = appointment_book(
            company=company,
            contact=ana,
            service=service,
            professional=marta,
            starts_at=TUESDAY_10,
            created_via="staff",
            now=MONDAY_8AM,
        )
        if state == CANCELLED:
            act("cancel", appointment)
        elif state == ATTENDED:
            act("mark_attended", appointment)
        elif state == NO_SHOW:
            act("mark_no_show", appointment)
        return Appointment.objects.get(pk=appointment.pk)

    return make


ALLOWED = [
    (SCHEDULED, "cancel", CANCELLED),
    (SCHEDULED, "reschedule", SCHEDULED),
    (SCHEDULED, "mark_attended", ATTENDED),
    (SCHEDULED, "mark_no_show", NO_SHOW),
]
FORBIDDEN = [
    (state, action, message)
    for state, message in [
        (CANCELLED, "Esa cita ya está cancelada."),
        (ATTENDED, "Esa cita ya fue atendida."),
        (NO_SHOW, "Esa cita ya pasó y quedó registrada como no asistida."),
    ]
    for action in ["cancel", "reschedule", "mark_attended", "mark_no_show"]
]
LABELS = {CANCELLED: "cancelada", ATTENDED: "atendida", NO_SHOW: "no asistida"}


@pytest.mark.parametrize(("source", "action", "target"), ALLOWED)
def test_an_allowed_transition_changes_the_state_and_is_logged(
    appointment_in, source, action, target
):
    appointment = appointment_in(source)

    act(action, appointment)

    appointment.refresh_from_db()
    assert appointment.state == target
    log = StateLog.objects.filter(
        content_type=ContentType.objects.get_for_model(Appointment), object_id=appointment.pk
    ).latest("timestamp")
    assert (log.source_state, log.state, log.transition) == (source, target, action)


def test_a_reschedule_keeps_it_scheduled_with_the_new_times(appointment_in):
    appointment = appointment_in(SCHEDULED)

    act("reschedule", appointment)

    appointment.refresh_from_db()
    assert appointment.state == SCHEDULED
    assert appointment.starts_at == WEDNESDAY_11
    assert appointment.ends_at == WEDNESDAY_11 + timedelta(minutes=30)
    assert appointment.blocked_until == WEDNESDAY_11 + timedelta(minutes=40)


@pytest.mark.parametrize(("source", "action", "message"), FORBIDDEN)
def test_a_terminal_state_rejects_every_transition_with_its_state(
    appointment_in, source, action, message
):
    appointment = appointment_in(source)

    with pytest.raises(ValidationFailed) as caught:
        act(action, appointment)

    assert str(caught.value.user_message) == message
    body = caught.value.as_dict()
    assert (body["state"], body["state_label"]) == (source, LABELS[source])
    assert caught.value.as_dict()["error_type"] == "VALIDATION"
    assert caught.value.code == "invalid_transition"
    appointment.refresh_from_db()
    assert appointment.state == source
    assert appointment.starts_at == TUESDAY_10


@pytest.mark.parametrize("source", [CANCELLED, ATTENDED, NO_SHOW])
@pytest.mark.parametrize("method", ["cancel", "mark_attended", "mark_no_show"])
def test_the_model_itself_refuses_to_leave_a_terminal_state(appointment_in, source, method):
    appointment = appointment_in(source)

    with pytest.raises(TransitionNotAllowed):
        getattr(appointment, method)()


def test_the_state_cannot_be_assigned_directly(appointment_in):
    appointment = appointment_in(SCHEDULED)

    with pytest.raises(AttributeError):
        appointment.state = CANCELLED


@pytest.mark.parametrize("action", ["mark_attended", "mark_no_show"])
def test_attendance_is_recorded_only_once_the_appointment_started(appointment_in, action):
    appointment = appointment_in(SCHEDULED)
    mark = appointment_mark_attended if action == "mark_attended" else appointment_mark_no_show

    with pytest.raises(ValidationFailed) as caught:
        mark(company=appointment.company, reference=appointment.reference, now=MONDAY_8AM)

    assert caught.value.code == "appointment_not_started"


@pytest.mark.parametrize(
    ("action", "target"), [("mark_attended", ATTENDED), ("mark_no_show", NO_SHOW)]
)
def test_attendance_may_be_recorded_from_the_very_instant_it_starts(appointment_in, action, target):
    appointment = appointment_in(SCHEDULED)
    mark = appointment_mark_attended if action == "mark_attended" else appointment_mark_no_show

    mark(company=appointment.company, reference=appointment.reference, now=TUESDAY_10)

    appointment.refresh_from_db()
    assert appointment.state == target


def test_attendance_before_the_start_is_refused_in_its_own_words(appointment_in):
    """Its own message, translated (English differs from Spanish), not the generic one."""
    appointment = appointment_in(SCHEDULED)

    with pytest.raises(ValidationFailed) as caught:
        appointment_mark_attended(
            company=appointment.company, reference=appointment.reference, now=MONDAY_8AM
        )

    told = {}
    for language in ("es", "en"):
        with translation.override(language):
            told[language] = str(caught.value.user_message)
            generic = str(ValidationFailed.default_message)
        assert told[language].strip() and told[language] != generic
    assert told["es"] != told["en"]
    appointment.refresh_from_db()
    assert appointment.state == SCHEDULED
