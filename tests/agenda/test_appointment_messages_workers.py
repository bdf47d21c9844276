"""Appointment messages through a real broker, two real Celery worker processes and real SMTP
servers: the confirmation leaves after the booking commits; the reminder is sent exactly once
with two beats sweeping at once, a copy of its task on each worker and a restarted beat; a
reminder already queued when its appointment is cancelled is dropped by the worker."""

import signal
from datetime import date, datetime, time, timedelta
from email.header import decode_header, make_header

import pytest

from agenda.appointment_messages import SEND_TASK, appointment_messages_sweep
from agenda.models import Appointment, AppointmentMessage
from agenda.services import appointment_book, appointment_cancel
from core.jobs import task_named
from tests import factories
from tests.factories import MADRID
from tests.servers import (
    at_once,
    postgresql_test_database_url,
    start_mail_worker,
    task_log,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres]

Kind = AppointmentMessage.Kind
Status = AppointmentMessage.Status
REDIS_DB = 10  # this module's own Redis database: no other session's worker sees its queues


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker, tmp_path_factory):
    """Two workers on two queues, each with a mail server of its own that answers after half a
    second (so a second copy of a task arrives while the first is still being sent)."""
    url = postgresql_test_database_url(django_db_blocker)
    log_dir = tmp_path_factory.mktemp("agenda-workers")
    with (
        start_mail_worker(
            database_url=url, redis_db=REDIS_DB, log_dir=log_dir, smtp_delay=0.5
        ) as first,
        start_mail_worker(
            database_url=url, redis_db=REDIS_DB, log_dir=log_dir, smtp_delay=0.5
        ) as second,
    ):
        yield [first, second]


@pytest.fixture
def first_worker(workers, celery_publisher):
    """This process publishes to the first worker's queue (the second gets only what a test
    sends it by name)."""
    (worker, inbox), _second = workers
    inbox.messages.clear()
    workers[1][1].messages.clear()
    celery_publisher(worker.broker_url, queue=worker.queue)
    return worker


def next_weekday_at_10(days_ahead: int = 3) -> datetime:
    """10:00 in Madrid on a weekday at least `days_ahead` days from now (the workers keep the
    real time): within Marta's hours, and far enough that its reminder is still to come."""
    day = date.today() + timedelta(days=days_ahead)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return datetime.combine(day, time(10), tzinfo=MADRID)


@pytest.fixture
def booked(company, service, marta):
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")
    return appointment_book(
        company=company,
        contact=carla,
        service=service,
        professional=marta,
        starts_at=next_weekday_at_10(),
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )


def subjects(*inboxes) -> list[str]:
    return [
        str(make_header(decode_header(message["Subject"])))
        for inbox in inboxes
        for message in inbox.messages
    ]


def message(appointment: Appointment, kind: str) -> AppointmentMessage:
    return AppointmentMessage.objects.filter(appointment=appointment, kind=kind).latest("pk")


def settled(appointment: Appointment, kind: str) -> AppointmentMessage | None:
    found = message(appointment, kind)
    return found if found.status in (Status.SENT, Status.FAILED, Status.NOT_SENT) else None


def test_the_reminder_is_sent_once_by_two_workers_two_beats_and_a_restarted_beat(
    workers, first_worker, booked
):
    (first, first_inbox), (second, second_inbox) = workers
    # The booking committed: its confirmation went to the first worker.
    confirmation = wait_for(lambda: settled(booked, Kind.BOOKED))
    assert confirmation.status == Status.SENT
    assert subjects(first_inbox) == ["Peluquería Sol: cita reservada"]
    reminder = message(booked, Kind.REMINDER)
    assert reminder.status == Status.SCHEDULED
    since = [first.log.stat().st_size, second.log.stat().st_size]

    # Two beats reach the due reminder at once: one queues it.
    due = reminder.due_at
    results = at_once(
        lambda: appointment_messages_sweep(now=due), lambda: appointment_messages_sweep(now=due)
    )
    assert sorted(r.queued for r in results) == [0, 1]
    # And a second copy of its task reaches the other worker, as a redelivery would.
    task_named(SEND_TASK).apply_async(args=[reminder.pk], queue=second.queue)

    sent = wait_for(lambda: settled(booked, Kind.REMINDER))
    assert sent.status == Status.SENT
    # Both copies ran to their end (a duplicate send would have been logged by now).
    for worker, offset in ((first, since[0]), (second, since[1])):
        wait_for(lambda w=worker, o=offset: "succeeded" in task_log(w, SEND_TASK, o))
    # A restarted beat sweeps again: nothing is due any more.
    assert appointment_messages_sweep(now=due + timedelta(minutes=1)).queued == 0

    # Both workers' mail servers together got one confirmation and one reminder.
    assert sorted(subjects(first_inbox, second_inbox)) == [
        "Peluquería Sol: cita reservada",
        "Peluquería Sol: recordatorio de su cita",
    ]
    assert (sent.attempts, sent.masked_destination) == (
        1,
        message(booked, Kind.BOOKED).masked_destination,
    )


def test_a_reminder_queued_before_its_appointment_is_cancelled_is_dropped_by_the_worker(
    workers, first_worker, booked, company
):
    (first, first_inbox), _second = workers
    wait_for(lambda: settled(booked, Kind.BOOKED))
    reminder = message(booked, Kind.REMINDER)
    since = first.log.stat().st_size
    first.process.send_signal(signal.SIGSTOP)  # the reminder waits in the broker
    try:
        assert appointment_messages_sweep(now=reminder.due_at).queued == 1
        reminder.refresh_from_db()
        assert reminder.status == Status.QUEUED
        appointment_cancel(company=company, reference=booked.reference)
    finally:
        first.process.send_signal(signal.SIGCONT)

    cancelled = wait_for(lambda: settled(booked, Kind.CANCELLED))
    wait_for(lambda: task_log(first, SEND_TASK, since).count("succeeded") == 2)

    assert cancelled.status == Status.SENT
    reminder.refresh_from_db()
    assert (reminder.status, reminder.error) == (Status.NOT_SENT, "appointment cancelled")
    assert reminder.attempts == 0  # never claimed: never handed to the mail server
    assert subjects(first_inbox) == [
        "Peluquería Sol: cita reservada",
        "Peluquería Sol: cita cancelada",
    ]
