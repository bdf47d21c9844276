"""Confirmations and reminders of appointments (agenda.appointment_messages), in process:
written by the services whoever books, moves or cancels; sent once, in the company's language,
with nothing personal but the appointment's own facts; dropped when they no longer apply;
opt-outs honoured; the reminder's lead validated. Through real workers:
tests/agenda/test_appointment_messages_workers.py."""

import re
from datetime import timedelta
from email.header import decode_header, make_header

import pytest
from django.core import signing
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agenda import appointment_messages, clock, tasks
from agenda.appointment_messages import (
    appointment_message_deliver,
    appointment_messages_sweep,
)
from agenda.models import AgendaSettings, Appointment, AppointmentMessage
from agenda.opt_out import LEGACY_LINKS_HONOURED_UNTIL, OPT_OUT_LINK_LIFETIME
from agenda.services import appointment_book, appointment_cancel, appointment_reschedule
from config.celery import app
from core.customer_messages import LOST_AFTER, RETRIES, SENDING_STALE_AFTER
from core.identity import identify_contact
from core.models import Contact, Conversation
from core.outbound import OutboundTransient
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue
from tests import factories
from tests.factories import ANA_EMAIL, ANA_PHONE, ANA_PHONE_NATIONAL, BRUNO_PHONE, MONDAY_8AM, local
from tests.integration.conftest import reference_of
from tests.row_faults import first_update_refused, update_refused
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

pytestmark = pytest.mark.django_db

Kind = AppointmentMessage.Kind
Status = AppointmentMessage.Status
TUESDAY_10 = local(2026, 12, 8, 10)
WEDNESDAY_11 = local(2026, 12, 9, 11)


@pytest.fixture
def now(monkeypatch):
    """The agenda's clock, Monday 7 December 2026 at 08:00 in Madrid; `now["at"] = ...` moves it."""
    moment = {"at": MONDAY_8AM}
    monkeypatch.setattr(clock, "now", lambda: moment["at"])
    return moment


@pytest.fixture
def sent(sms_outbox, django_capture_on_commit_callbacks):
    """Run what the services publish after their commit (tasks run eagerly in the tests)."""

    def run(write):
        with django_capture_on_commit_callbacks(execute=True):
            return write()

    return run


@pytest.fixture
def book(company, service, marta, ana, now, sent):
    def book(starts_at=TUESDAY_10, contact=None, **kwargs):
        return sent(
            lambda: appointment_book(
                company=company,
                contact=contact or ana,
                service=service,
                professional=marta,
                starts_at=starts_at,
                created_via=kwargs.pop("created_via", Appointment.Via.STAFF),
                **kwargs,
            )
        )

    return book


def messages_of(appointment: Appointment) -> list[tuple[str, str]]:
    return [
        (m.kind, m.status)
        for m in AppointmentMessage.objects.filter(appointment=appointment).order_by("pk")
    ]


def reminder_of(appointment: Appointment) -> AppointmentMessage:
    return AppointmentMessage.objects.filter(appointment=appointment, kind=Kind.REMINDER).latest(
        "pk"
    )


# What the customer gets ---------------------------------------------------------------------


def test_a_booking_texts_its_confirmation_with_the_appointments_facts_only(book, sms_outbox, ana):
    appointment = book()

    (sms,) = sms_outbox
    assert sms.to == ANA_PHONE
    assert sms.body == (
        "Peluquería Sol: su cita de Corte de pelo con Marta queda reservada para el martes "
        "08/12/2026 a las 10:00."
    )
    # Nothing else about the customer: not their name, document, phone, email or reference.
    for personal in ("Ana", "García", ana.document_number, ANA_PHONE_NATIONAL, "ana@", "AP-"):
        assert personal not in sms.body
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    assert (confirmation.status, confirmation.channel) == (Status.SENT, "sms")
    assert confirmation.masked_destination == "teléfono terminado en 22"
    assert confirmation.provider_message_id.startswith("locmem-")
    assert confirmation.attempts == 1
    # The reminder waits for its time: 24 hours before by default.
    reminder = reminder_of(appointment)
    assert (reminder.status, reminder.due_at) == (
        Status.SCHEDULED,
        TUESDAY_10 - timedelta(hours=24),
    )


@pytest.fixture
def book_in_lisbon(make_company, django_capture_on_commit_callbacks, now):
    """Book at an English-speaking shop in Lisbon, on Tuesday at 11:00 Madrid's time."""

    def book():
        shop = make_company(
            name="Lisbon Barbers", language="en", timezone="Europe/Lisbon", country="PT"
        )
        service = factories.service(shop, name="Haircut")
        with django_capture_on_commit_callbacks(execute=True):
            return appointment_book(
                company=shop,
                contact=factories.contact(shop, phone="+351912345678"),
                service=service,
                professional=factories.marta(shop, service),
                starts_at=local(2026, 12, 8, 11),  # 11:00 in Madrid is 10:00 in Lisbon
                created_via=Appointment.Via.STAFF,
            )

    return book


def test_the_message_is_in_the_companys_language_and_time_zone(book_in_lisbon, sms_outbox):
    book_in_lisbon()

    (sms,) = sms_outbox
    assert sms.body == (
        "Lisbon Barbers: your Haircut appointment with Marta is booked for Tuesday, "
        "2026-12-08 at 10:00."
    )


def test_an_email_customer_gets_it_through_a_real_mail_server(
    company, book, smtp_refusing, sms_outbox
):
    server = smtp_refusing()  # accepts everything
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")

    appointment = book(contact=carla)

    ((recipients, email),) = server.messages
    assert recipients == ["carla@example.com"]
    assert str(make_header(decode_header(email["Subject"]))) == "Peluquería Sol: cita reservada"
    assert "Corte de pelo con Marta" in email.get_payload(decode=True).decode()
    assert sms_outbox == []
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    assert (confirmation.channel, confirmation.status) == ("email", Status.SENT)
    assert confirmation.provider_message_id == email["Message-ID"]


# Moves and cancellations ----------------------------------------------------------------------


def test_a_move_confirms_the_new_time_and_moves_the_reminder_with_it(
    book, company, sms_outbox, sent
):
    appointment = book()
    first_reminder = reminder_of(appointment)

    sent(
        lambda: appointment_reschedule(
            company=company, reference=appointment.reference, starts_at=WEDNESDAY_11
        )
    )

    assert sms_outbox[-1].body == (
        "Peluquería Sol: su cita de Corte de pelo con Marta se ha cambiado al miércoles "
        "09/12/2026 a las 11:00."
    )
    first_reminder.refresh_from_db()
    assert (first_reminder.status, first_reminder.error) == (Status.NOT_SENT, "appointment moved")
    reminder = reminder_of(appointment)
    assert (reminder.status, reminder.starts_at) == (Status.SCHEDULED, WEDNESDAY_11)
    assert reminder.due_at == WEDNESDAY_11 - timedelta(hours=24)


def test_a_cancellation_confirms_it_and_drops_the_reminder(book, company, sms_outbox, sent):
    appointment = book()

    sent(lambda: appointment_cancel(company=company, reference=appointment.reference))

    assert sms_outbox[-1].body == (
        "Peluquería Sol: su cita de Corte de pelo con Marta del martes 08/12/2026 "
        "a las 10:00 ha quedado cancelada."
    )
    assert messages_of(appointment) == [
        (Kind.BOOKED, Status.SENT),
        (Kind.REMINDER, Status.NOT_SENT),
        (Kind.CANCELLED, Status.SENT),
    ]
    assert reminder_of(appointment).error == "appointment cancelled"


def test_a_cancelled_appointments_reminder_already_queued_is_dropped_not_sent(
    book, company, sms_outbox, sent, now, monkeypatch
):
    appointment = book()
    reminder = reminder_of(appointment)
    published = []
    # The task waits in the broker.
    monkeypatch.setattr(appointment_messages, "publish", published.append)
    now["at"] = reminder.due_at
    assert appointment_messages_sweep().queued == 1
    assert published == [reminder.pk]
    reminder.refresh_from_db()
    assert reminder.status == Status.QUEUED

    sent(lambda: appointment_cancel(company=company, reference=appointment.reference))
    sms_outbox.clear()
    # The queued task reaches a worker after the cancellation.
    assert appointment_message_deliver(message_id=reminder.pk, last_try=False) == "skipped"

    assert [m.body for m in sms_outbox] == []
    reminder.refresh_from_db()
    assert (reminder.status, reminder.error) == (Status.NOT_SENT, "appointment cancelled")


def test_a_queued_message_whose_appointment_changed_at_the_claim_is_dropped(book, sms_outbox, now):
    """The claim reads the appointment under its lock: a reminder still queued for a start the
    appointment no longer has (or for one that is no longer scheduled) is not sent."""
    appointment = book()
    reminder = reminder_of(appointment)
    AppointmentMessage.objects.filter(pk=reminder.pk).update(status=Status.QUEUED)
    sms_outbox.clear()
    Appointment.objects.filter(pk=appointment.pk).update(
        starts_at=WEDNESDAY_11, ends_at=WEDNESDAY_11 + timedelta(minutes=30)
    )

    assert appointment_message_deliver(message_id=reminder.pk, last_try=False) == "skipped"

    reminder.refresh_from_db()
    assert (reminder.status, reminder.error) == (Status.NOT_SENT, "appointment moved")
    assert sms_outbox == []


def test_a_booking_closer_than_the_reminders_lead_gets_its_confirmation_alone(book, now):
    now["at"] = TUESDAY_10 - timedelta(hours=5)

    appointment = book(starts_at=TUESDAY_10)

    assert messages_of(appointment) == [(Kind.BOOKED, Status.SENT)]


# The reminder ---------------------------------------------------------------------------------


def test_the_reminder_goes_once_when_due_however_often_the_sweep_runs(book, sms_outbox, now):
    appointment = book()
    reminder = reminder_of(appointment)
    sms_outbox.clear()

    now["at"] = reminder.due_at - timedelta(minutes=1)
    assert appointment_messages_sweep().queued == 0  # not yet
    now["at"] = reminder.due_at
    assert appointment_messages_sweep().queued == 1
    # A restarted beat sweeps again at once, and again a minute later: nothing more.
    assert appointment_messages_sweep().queued == 0
    now["at"] = reminder.due_at + timedelta(minutes=1)
    assert appointment_messages_sweep().queued == 0

    (sms,) = sms_outbox
    assert sms.body == (
        "Peluquería Sol: le recordamos su cita de Corte de pelo con Marta el martes "
        "08/12/2026 a las 10:00."
    )
    reminder.refresh_from_db()
    assert reminder.status == Status.SENT


def test_the_reminders_lead_is_the_companys_setting(book, agenda_settings):
    agenda_settings.reminder_hours_before = 2
    agenda_settings.save()

    appointment = book()

    assert reminder_of(appointment).due_at == TUESDAY_10 - timedelta(hours=2)


@pytest.mark.parametrize("hours", [0, -5])
def test_a_reminder_lead_of_zero_or_negative_hours_is_refused(agenda_settings, hours):
    agenda_settings.reminder_hours_before = hours

    with pytest.raises(ValidationError) as refused:
        agenda_settings.full_clean()

    (error,) = refused.value.error_dict["reminder_hours_before"]
    assert error.code == "min_value"
    assert error.messages == ["El recordatorio debe enviarse al menos una hora antes de la cita."]
    # A write that skips the validators meets the database's own check.
    with pytest.raises(IntegrityError), transaction.atomic():
        AgendaSettings.objects.filter(pk=agenda_settings.pk).update(reminder_hours_before=hours)
    agenda_settings.refresh_from_db()
    assert agenda_settings.reminder_hours_before == 24


def test_staff_setting_a_zero_hour_reminder_see_the_error_and_nothing_changes(
    client, company, agenda_settings, make_staff
):
    client.force_login(make_staff("jefa", role="supervisor"))
    url = reverse("admin:agenda_agendasettings_change", args=[agenda_settings.pk])
    form = {
        "company": company.pk,
        "minimum_notice_minutes": 60,
        "booking_horizon_days": 60,
        "slot_step_minutes": 30,
        "cancellation_cutoff_minutes": 120,
        "no_show_grace_minutes": 60,
        "reminder_hours_before": 0,
    }

    response = client.post(url, form)

    assert response.status_code == 200
    assert "El recordatorio debe enviarse al menos una hora antes de la cita." in (
        response.content.decode()
    )
    agenda_settings.refresh_from_db()
    assert agenda_settings.reminder_hours_before == 24

    response = client.post(url, {**form, "reminder_hours_before": 3})
    assert response.status_code == 302
    agenda_settings.refresh_from_db()
    assert agenda_settings.reminder_hours_before == 3


# Opting out -----------------------------------------------------------------------------------


def test_a_customer_who_opted_out_of_sms_gets_email_instead(book, ana, sms_outbox, smtp_refusing):
    server = smtp_refusing()
    Contact.objects.filter(pk=ana.pk).update(sms_opt_out=True)
    ana.refresh_from_db()

    appointment = book()

    assert sms_outbox == []
    ((recipients, _email),) = server.messages
    assert recipients == [ANA_EMAIL]
    assert reminder_of(appointment).channel == "email"


def test_a_customer_who_opted_out_of_both_gets_nothing_and_staff_see_why(book, ana, sms_outbox):
    Contact.objects.filter(pk=ana.pk).update(sms_opt_out=True, email_opt_out=True)
    ana.refresh_from_db()

    appointment = book()

    assert sms_outbox == []
    assert messages_of(appointment) == [
        (Kind.BOOKED, Status.NOT_SENT),
        (Kind.REMINDER, Status.NOT_SENT),
    ]
    assert {m.error for m in appointment.messages.all()} == {"opted out"}


def test_an_opt_out_after_the_reminder_was_written_is_honoured_when_it_is_due(
    book, ana, sms_outbox, now
):
    appointment = book()
    reminder = reminder_of(appointment)
    sms_outbox.clear()
    Contact.objects.filter(pk=ana.pk).update(sms_opt_out=True)

    now["at"] = reminder.due_at
    appointment_messages_sweep()

    assert sms_outbox == []
    reminder.refresh_from_db()
    assert (reminder.status, reminder.error) == (Status.NOT_SENT, "opted out")


def test_staff_set_the_opt_out_on_the_contacts_page(client, ana, make_staff):
    client.force_login(make_staff("jefa", role="admin"))
    url = reverse("admin:core_contact_change", args=[ana.pk])
    page = client.get(url).content.decode()
    assert 'name="sms_opt_out"' in page and 'name="email_opt_out"' in page

    response = client.post(
        url,
        {
            "company": ana.company_id,
            "first_name": ana.first_name,
            "last_name": ana.last_name,
            "document_number": ana.document_number,
            "phone": ana.phone,
            "email": ana.email,
            "sms_opt_out": "on",
        },
    )

    assert response.status_code == 302
    ana.refresh_from_db()
    assert (ana.sms_opt_out, ana.email_opt_out) == (True, False)


def opt_out_path(text: str) -> str:
    """The path of the opt-out link a message's text ends with."""
    match = re.search(r"https://citas\.example\.com(/messages/opt-out/\S+)$", text)
    assert match, text
    return match.group(1)


def test_a_message_links_to_opting_out_of_its_channel_which_a_get_only_asks(
    book, ana, sms_outbox, client, settings, now
):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    appointment = book()

    (sms,) = sms_outbox
    assert sms.body.startswith("Peluquería Sol: su cita de Corte de pelo con Marta queda ")
    # After the link to manage the appointment (agenda.manage_links), the opt-out's.
    assert " a las 10:00. Para ver, cambiar o cancelar su cita: https://citas.example.com/a/" in (
        sms.body
    )
    assert " Para no recibir más avisos: https://citas.example.com/" in sms.body
    path = opt_out_path(sms.body)
    asked = client.get(path)  # a link scanner, or the customer before choosing
    assert asked.status_code == 200
    assert "¿Dejar de recibir por SMS las confirmaciones" in asked.content.decode()
    ana.refresh_from_db()
    assert (ana.sms_opt_out, ana.email_opt_out) == (False, False)

    done = client.post(path)

    assert done.status_code == 200
    assert "Hecho: ya no recibirá avisos de sus citas por SMS." in done.content.decode()
    ana.refresh_from_db()
    assert (ana.sms_opt_out, ana.email_opt_out) == (True, False)
    # The reminder written with the booking is not sent by SMS when its time comes.
    reminder = reminder_of(appointment)
    now["at"] = reminder.due_at
    appointment_messages_sweep()
    assert len(sms_outbox) == 1
    reminder.refresh_from_db()
    assert (reminder.status, reminder.error) == (Status.NOT_SENT, "opted out")
    # Following the link again is no change, and says the same.
    again = client.post(path)
    assert again.status_code == 200
    assert again.content == done.content


def test_an_email_offers_one_click_unsubscribe_which_a_mail_client_posts_without_csrf(
    company, book, smtp_refusing, settings
):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    server = smtp_refusing()
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")

    book(contact=carla)

    ((_recipients, email),) = server.messages
    path = opt_out_path(email.get_payload(decode=True).decode().strip())
    # Long headers are folded on the wire; unfolded, it is the link.
    assert "".join(email["List-Unsubscribe"].split()) == f"<https://citas.example.com{path}>"
    assert email["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    mail_client = Client(enforce_csrf_checks=True)  # RFC 8058's POST carries no token of ours
    response = mail_client.post(
        path, "List-Unsubscribe=One-Click", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    carla.refresh_from_db()
    assert (carla.email_opt_out, carla.sms_opt_out) == (True, False)


def test_an_altered_opt_out_link_is_refused_and_changes_nothing(
    book, ana, bruno, sms_outbox, client, settings
):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    book()
    path = opt_out_path(sms_outbox[0].body)
    key = path.rsplit("/", 1)[1]
    legacy_signature = signing.Signer(salt="garante.agenda.opt-out").sign(f"{ana.pk}.s")
    forged = [
        f"/messages/opt-out/{key[:-1]}{'A' if key[-1] != 'A' else 'B'}",  # one character off
        f"/messages/opt-out/{'A' * len(key)}",
        f"/messages/opt-out/{key}x",
        # The first format: another contact, or the other channel, under a real signature.
        f"/messages/opt-out/{bruno.pk}.s:{legacy_signature.split(':')[1]}",
        f"/messages/opt-out/{ana.pk}.e:{legacy_signature.split(':')[1]}",
        "/messages/opt-out/nothing-signed",
    ]

    for url in forged:
        response = client.post(url)
        assert response.status_code == 404, url
        assert "Este enlace no es válido." in response.content.decode()

    assert Contact.objects.filter(sms_opt_out=True).count() == 0
    assert Contact.objects.filter(email_opt_out=True).count() == 0


def test_an_opt_out_link_carries_an_opaque_key_of_its_message_not_a_row_id(
    book, ana, sms_outbox, client, settings
):
    """The first links held the contact's sequential id: whoever got one knew roughly how many
    customers the company had, and which id was theirs."""
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    first = book()
    book(starts_at=WEDNESDAY_11)

    keys = [opt_out_path(sms.body).rsplit("/", 1)[1] for sms in sms_outbox]

    assert len(keys) == 2 and keys[0] != keys[1]
    for key in keys:
        assert re.fullmatch(r"[A-Za-z0-9_-]{24}", key)  # 144 random bits, nothing else
    sent_keys = [
        m.opt_out_key
        for m in AppointmentMessage.objects.filter(kind=Kind.BOOKED).order_by("created_at")
    ]
    assert sent_keys == keys
    # Nothing of a row id left in the link: the first format's "<contact id>.<channel>:".
    assert not any(str(first.contact_id) + "." in key or ":" in key for key in keys)
    assert client.post(f"/messages/opt-out/{keys[1]}").status_code == 200
    ana.refresh_from_db()
    assert ana.sms_opt_out


def test_an_opt_out_link_works_for_its_lifetime_then_shows_the_expired_page(
    book, ana, sms_outbox, client, settings, now
):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    book()
    path = opt_out_path(sms_outbox[0].body)
    sent_at = now["at"]

    now["at"] = sent_at + OPT_OUT_LINK_LIFETIME - timedelta(minutes=1)
    assert client.get(path).status_code == 200
    now["at"] = sent_at + OPT_OUT_LINK_LIFETIME
    asked, posted = client.get(path), client.post(path)

    for response in (asked, posted):
        assert response.status_code == 410
        assert "Este enlace ha caducado." in response.content.decode()
    ana.refresh_from_db()
    assert (ana.sms_opt_out, ana.email_opt_out) == (False, False)


def test_a_link_of_the_first_format_works_until_the_documented_date_then_expires(
    ana, bruno, client, now
):
    """Links already sent held the contact's id, signed, and never expired: they are honoured
    until LEGACY_LINKS_HONOURED_UNTIL (docs/appointment-messages.md), then expire."""
    signer = signing.Signer(salt="garante.agenda.opt-out")
    ana_link, bruno_link = (
        f"/messages/opt-out/{signer.sign(f'{contact.pk}.s')}" for contact in (ana, bruno)
    )

    now["at"] = LEGACY_LINKS_HONOURED_UNTIL - timedelta(minutes=1)
    assert client.post(ana_link).status_code == 200
    now["at"] = LEGACY_LINKS_HONOURED_UNTIL
    expired = client.post(bruno_link)

    assert expired.status_code == 410
    assert "Este enlace ha caducado." in expired.content.decode()
    ana.refresh_from_db()
    bruno.refresh_from_db()
    assert (ana.sms_opt_out, bruno.sms_opt_out) == (True, False)


def test_the_opt_out_page_is_in_the_companys_language(book_in_lisbon, sms_outbox, client, settings):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    book_in_lisbon()

    (sms,) = sms_outbox
    assert " at 10:00. To see, change or cancel your appointment: https://citas.example.com/a/" in (
        sms.body
    )
    assert " To stop these messages: https://citas.example.com/" in sms.body
    page = client.get(opt_out_path(sms.body)).content.decode()
    assert "Stop getting confirmations and reminders of your appointments by SMS?" in page
    assert '<html lang="en">' in page


def test_without_a_public_address_messages_carry_no_link(book, sms_outbox, settings):
    settings.GARANTE_PUBLIC_URL = ""

    book()

    (sms,) = sms_outbox
    assert sms.body.endswith("a las 10:00.")


# Every path: the agent, staff, the integration API -------------------------------------------


def test_a_staff_booking_in_the_admin_sends_the_confirmation(
    client, company, service, marta, ana, make_staff, sms_outbox, now, sent
):
    client.force_login(make_staff("recepcion"))
    form = {
        "company": company.pk,
        "contact": ana.pk,
        "service": service.pk,
        "professional": marta.pk,
        "day": "2026-12-08",
        "at": "10:00",
    }

    response = sent(lambda: client.post(reverse("admin:agenda_appointment_add"), form))

    assert response.status_code == 302
    (sms,) = sms_outbox
    assert "queda reservada para el martes 08/12/2026 a las 10:00" in sms.body


def test_staff_see_each_messages_delivery_state_on_the_appointment(
    client, book, company, make_staff, sent
):
    appointment = book()
    sent(lambda: appointment_cancel(company=company, reference=appointment.reference))
    client.force_login(make_staff("recepcion"))

    page = client.get(reverse("admin:agenda_appointment_change", args=[appointment.pk]))

    html = page.content.decode()
    assert "Messages to the customer" in html or "Mensajes al cliente" in html
    for shown in ("Confirmación de reserva", "Recordatorio", "Confirmación de cancelación"):
        assert shown in html
    assert "la cita se canceló" in html  # why the reminder was not sent, in Spanish
    assert "appointment cancelled" not in html
    assert "teléfono terminado en 22" in html
    assert 'name="messages-0-status"' not in html  # read-only


def test_the_integration_api_and_the_agent_go_through_the_same_messages(
    company, service, marta, ana, now, sms_outbox, django_capture_on_commit_callbacks
):
    _credential, token = integration_credential_issue(
        company=company, name="ERP", scope=IntegrationCredential.Scope.READ_WRITE
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {
        "contact": reference_of(ana),
        "service": reference_of(service),
        "professional": reference_of(marta),
        "starts_at": "2026-12-08T10:00:00+01:00",
    }

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/v1/appointments", body, format="json", HTTP_IDEMPOTENCY_KEY="k1")

    assert response.status_code == 201, response.content
    (sms,) = sms_outbox
    assert "queda reservada para el martes 08/12/2026 a las 10:00" in sms.body
    appointment = Appointment.objects.get(company=company)
    assert appointment.created_via == Appointment.Via.INTEGRATION
    assert messages_of(appointment) == [
        (Kind.BOOKED, Status.SENT),
        (Kind.REMINDER, Status.SCHEDULED),
    ]


# Failures -------------------------------------------------------------------------------------


def queued_confirmation(appointment: Appointment) -> AppointmentMessage:
    """The appointment's confirmation put back in the queue, as if its task were on its way."""
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    AppointmentMessage.objects.filter(pk=confirmation.pk).update(
        status=Status.QUEUED, sent_at=None, attempts=0
    )
    return confirmation


def test_a_mail_server_refusing_for_now_is_retried_and_for_good_is_not(
    company, book, smtp_refusing
):
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")
    smtp_refusing("550 5.1.1 No such user")
    appointment = book(contact=carla)
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    assert (confirmation.status, confirmation.error) == (
        Status.FAILED,
        "SMTP recipient refused 550",
    )

    server = smtp_refusing("451 4.7.1 Greylisted, please try again later", times=1)
    queued_confirmation(appointment)
    with pytest.raises(OutboundTransient):
        appointment_message_deliver(message_id=confirmation.pk, last_try=False)
    confirmation.refresh_from_db()
    assert confirmation.status == Status.RETRYING
    # The retry sends it, once.
    assert appointment_message_deliver(message_id=confirmation.pk, last_try=False) == "sent"
    assert appointment_message_deliver(message_id=confirmation.pk, last_try=False) == "skipped"
    assert len(server.messages) == 1
    confirmation.refresh_from_db()
    assert (confirmation.status, confirmation.attempts) == (Status.SENT, 2)


def test_the_last_try_of_a_transient_failure_ends_failed(company, book, smtp_refusing):
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")
    smtp_refusing()
    appointment = book(contact=carla)
    confirmation = queued_confirmation(appointment)
    smtp_refusing("421 4.3.2 Service not available")

    assert appointment_message_deliver(message_id=confirmation.pk, last_try=True) == "failed"

    confirmation.refresh_from_db()
    assert confirmation.status == Status.FAILED


@pytest.mark.postgres
def test_the_sweep_goes_on_past_a_row_that_fails_counts_it_and_queues_it_next_run(
    book, bruno, sms_outbox, now, caplog
):
    first = book()
    second = book(starts_at=WEDNESDAY_11, contact=bruno)
    failing = reminder_of(first)
    sms_outbox.clear()
    now["at"] = WEDNESDAY_11 - timedelta(hours=1)

    with update_refused(failing):
        result = appointment_messages_sweep()

    assert (result.queued, result.failed) == (1, 1)
    assert f"sweep agenda.messages_queue: row {failing.pk} failed" in caplog.text
    assert [m.to for m in sms_outbox] == [BRUNO_PHONE]  # Bruno's reminder went
    assert reminder_of(second).status == Status.SENT
    assert reminder_of(first).status == Status.SCHEDULED  # still due
    # Ana's appointment started an hour ago by the next run: her late reminder is dropped.
    assert appointment_messages_sweep().queued == 1
    assert (reminder_of(first).status, reminder_of(first).error) == (
        Status.NOT_SENT,
        "appointment already started",
    )


def test_a_message_lost_on_its_way_is_published_again_and_sent_once(book, sms_outbox, now):
    appointment = book()
    confirmation = queued_confirmation(appointment)
    AppointmentMessage.objects.filter(pk=confirmation.pk).update(queued_at=MONDAY_8AM)
    sms_outbox.clear()

    now["at"] = MONDAY_8AM + LOST_AFTER - timedelta(seconds=1)
    assert appointment_messages_sweep().queued == 0  # may still be on its way
    now["at"] = MONDAY_8AM + LOST_AFTER
    assert appointment_messages_sweep().queued == 1

    assert len(sms_outbox) == 1
    confirmation.refresh_from_db()
    assert confirmation.status == Status.SENT


def test_a_message_whose_worker_stopped_while_sending_is_settled_unknown(book, now):
    appointment = book()
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    AppointmentMessage.objects.filter(pk=confirmation.pk).update(
        status=Status.SENDING, claimed_at=MONDAY_8AM
    )

    now["at"] = MONDAY_8AM + SENDING_STALE_AFTER
    assert appointment_messages_sweep().settled == 1

    confirmation.refresh_from_db()
    assert (confirmation.status, confirmation.error) == (Status.UNKNOWN, "stopped while sending")
    assert appointment_message_deliver(message_id=confirmation.pk, last_try=False) == "skipped"


def test_the_sweep_is_on_beat_and_the_send_task_has_limits_and_backoff():
    app.loader.import_default_modules()
    app.finalize()
    schedule = app.conf.beat_schedule
    assert any(e["task"] == tasks.MESSAGES_SWEEP_TASK_NAME for e in schedule.values())
    send = tasks.appointment_message_send
    assert (send.soft_time_limit, send.time_limit) == (45, 60)
    assert OutboundTransient in send.autoretry_for
    assert send.retry_backoff and send.retry_jitter and send.max_retries == RETRIES
    sweep = tasks.appointment_messages_sweep_task
    assert (sweep.soft_time_limit, sweep.time_limit) == (300, 360)


def test_a_mail_server_down_after_the_commit_leaves_the_booking_made_and_the_message_failed(
    company, book, smtp_refusing
):
    carla = factories.contact(company, first_name="Carla", email="carla@example.com")
    server = smtp_refusing("421 4.3.2 Service not available")

    # The send runs in process here (eagerly), its retries at once, each refused for now.
    appointment = book(contact=carla)

    assert Appointment.objects.get(pk=appointment.pk).state == Appointment.State.SCHEDULED
    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    assert confirmation.status == Status.FAILED
    assert confirmation.error == "SMTP recipient refused 421"
    assert confirmation.attempts == server.rcpt_attempts == RETRIES + 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_message_sent_while_its_record_fails_is_recorded_by_the_retry_never_sent_again(
    book, sms_outbox, caplog
):
    """The text left; the UPDATE recording it failed (a trigger refuses it once, as a
    database that stopped answering would). The task's retry records it and sends nothing:
    the customer gets one text, and staff see it sent, not unknown."""
    with first_update_refused(AppointmentMessage, "NEW.status = 'sent'"):
        appointment = book()

    confirmation = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.BOOKED)
    (text,) = sms_outbox
    assert (confirmation.status, confirmation.attempts) == (Status.SENT, 1)
    assert text.to == appointment.contact.phone
    assert confirmation.provider_message_id.startswith("locmem-")
    assert f"appointment message {confirmation.pk}: sent, recording it is retried" in caplog.text


def test_the_agents_booking_texts_the_confirmation_once_even_when_its_call_is_replayed(
    company, marta, ana, now, sms_outbox, django_capture_on_commit_callbacks
):
    conversation = Conversation.objects.create(company=company, external_id="conv-messages")
    identify_contact(conversation=conversation, kind="document", value=ana.document_number)

    def call(name, arguments, key=None):
        meta = CallMeta(conversation_id="conv-messages", idempotency_key=key)
        with django_capture_on_commit_callbacks(execute=True):
            return call_tool(
                registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
            )

    found = call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08", "to": "2026-12-08", "limit": 1},
    )
    booking = {"identifier": ana.document_number, "service": "Corte de pelo"}
    booking["slot"] = found.body["items"][0]["slot"]
    first = call("book_appointment", booking, key="book-1")
    replay = call("book_appointment", booking, key="book-1")  # the Gateway retried it

    assert first.is_error is False, first.body
    assert replay.body == first.body
    (sms,) = sms_outbox
    assert sms.body == (
        "Peluquería Sol: su cita de Corte de pelo con Marta queda reservada para el martes "
        "08/12/2026 a las 09:00."
    )
    appointment = Appointment.objects.get(reference=first.body["appointment"])
    assert appointment.created_via == Appointment.Via.GATEWAY


def test_the_agents_move_and_cancellation_each_text_one_confirmation_even_when_replayed(
    company, marta, ana, now, sms_outbox, django_capture_on_commit_callbacks
):
    conversation = Conversation.objects.create(company=company, external_id="conv-changes")
    identify_contact(conversation=conversation, kind="document", value=ana.document_number)

    def call(name, arguments, key=None):
        meta = CallMeta(conversation_id="conv-changes", idempotency_key=key)
        with django_capture_on_commit_callbacks(execute=True):
            result = call_tool(
                registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
            )
        assert result.is_error is False, result.body
        return result.body

    def first_slot(day, **more):
        found = call(
            "find_available_slots",
            {"service": "Corte de pelo", "from": day, "to": day, "limit": 1, **more},
        )
        return found["items"][0]["slot"]

    who = {"identifier": ana.document_number}
    booked = call(
        "book_appointment",
        {**who, "service": "Corte de pelo", "slot": first_slot("2026-12-08")},
        key="book",
    )
    reference = booked["appointment"]
    move = {**who, "appointment": reference}
    move["slot"] = first_slot("2026-12-09", appointment=reference)
    moved = call("reschedule_appointment", move, key="move")
    assert call("reschedule_appointment", move, key="move") == moved  # the Gateway retried
    cancelled = call("cancel_appointment", {**who, "appointment": reference}, key="cancel")
    assert call("cancel_appointment", {**who, "appointment": reference}, key="cancel") == cancelled

    assert [sms.body.split(": ", 1)[1].split(" con Marta ")[1] for sms in sms_outbox] == [
        "queda reservada para el martes 08/12/2026 a las 09:00.",
        "se ha cambiado al miércoles 09/12/2026 a las 09:00.",
        "del miércoles 09/12/2026 a las 09:00 ha quedado cancelada.",
    ]
    appointment = Appointment.objects.get(reference=reference)
    assert messages_of(appointment) == [
        (Kind.BOOKED, Status.SENT),
        (Kind.REMINDER, Status.NOT_SENT),
        (Kind.MOVED, Status.SENT),
        (Kind.REMINDER, Status.NOT_SENT),
        (Kind.CANCELLED, Status.SENT),
    ]
