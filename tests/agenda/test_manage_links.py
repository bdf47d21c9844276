"""Manage-my-booking links (agenda.manage_links, agenda.manage_views): the link every
confirmation and reminder carries, the page it opens, moving and cancelling through the
agent's services once per form, and every refusal a clear page that changes nothing.
Security (forged, expired, replayed, cross-tenant links, rate limits): test_manage_link_security.py.
Browser: test_browser_links.py."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django_fsm_log.models import StateLog

from agenda import clock
from agenda.appointment_messages import appointment_messages_sweep
from agenda.manage_actions import HISTORY_NOTE
from agenda.models import Appointment, AppointmentMessage
from agenda.services import appointment_book, appointment_cancel, appointment_mark_attended
from core.models import IdempotencyRecord
from tests import factories
from tests.customer_links import PUBLIC_URL, form_token, manage_path, slot_values, visible_text
from tests.factories import MONDAY_8AM, local

pytestmark = pytest.mark.django_db

Kind = AppointmentMessage.Kind
TUESDAY_10 = local(2026, 12, 8, 10)


@pytest.fixture(autouse=True)
def links_on(settings):
    """The site's public address set (links are written only then); the link counters empty."""
    settings.GARANTE_PUBLIC_URL = PUBLIC_URL
    caches["shared"].clear()
    yield
    caches["shared"].clear()


@pytest.fixture
def now(monkeypatch):
    moment = {"at": MONDAY_8AM}
    monkeypatch.setattr(clock, "now", lambda: moment["at"])
    return moment


@pytest.fixture
def booked(company, service, marta, ana, now, sms_outbox, django_capture_on_commit_callbacks):
    """Ana's appointment on Tuesday at 10:00, its confirmation texted: (appointment, path)."""
    with django_capture_on_commit_callbacks(execute=True):
        appointment = appointment_book(
            company=company,
            contact=ana,
            service=service,
            professional=marta,
            starts_at=TUESDAY_10,
            created_via=Appointment.Via.GATEWAY,
        )
    (sms,) = sms_outbox
    return appointment, manage_path(sms.body)


def test_the_confirmation_carries_a_link_before_the_opt_out(booked, sms_outbox):
    (sms,) = sms_outbox
    assert sms.body.startswith(
        "Peluquería Sol: su cita de Corte de pelo con Marta queda reservada para el martes "
        "08/12/2026 a las 10:00. Para ver, cambiar o cancelar su cita: "
        f"{PUBLIC_URL}/a/"
    )
    assert " Para no recibir más avisos: " in sms.body
    # Opaque: 40 URL-safe characters, no row id; one key per message.
    token = manage_path(sms.body).rsplit("/", 1)[1]
    assert len(token) == 40
    appointment, _path = booked
    assert str(appointment.pk) not in token.split("-")
    assert appointment.reference not in sms.body


def test_the_reminder_carries_a_link_too_and_the_cancellation_none(
    booked, sms_outbox, now, company, django_capture_on_commit_callbacks
):
    appointment, first = booked
    reminder = AppointmentMessage.objects.get(appointment=appointment, kind=Kind.REMINDER)
    now["at"] = reminder.due_at
    appointment_messages_sweep()
    assert len(sms_outbox) == 2
    second = manage_path(sms_outbox[1].body)
    assert second != first  # each message its own key
    with django_capture_on_commit_callbacks(execute=True):
        appointment_cancel(company=company, reference=appointment.reference)
    assert "cancelada" in sms_outbox[2].body
    assert "/a/" not in sms_outbox[2].body


def test_the_page_shows_the_appointment_in_the_companys_language_and_zone(client, booked):
    _appointment, path = booked

    page = client.get(path)

    assert page.status_code == 200
    text = visible_text(page.content.decode())
    assert "Peluquería Sol" in text
    assert "Servicio Corte de pelo" in text
    assert "Con Marta" in text
    assert "Día martes 08/12/2026" in text
    assert "Hora 10:00" in text
    assert "Estado agendada" in text
    assert "Cambiar de día u hora" in text and "Cancelar la cita" in text
    # Nothing of the customer's own data.
    for personal in ("Ana", "García", factories.ANA_PHONE, factories.ANA_EMAIL, "AP-"):
        assert personal not in page.content.decode()
    assert '<html lang="es">' in page.content.decode()


def test_an_english_company_shows_it_in_english_in_its_own_time_zone(
    make_company, now, sms_outbox, client, django_capture_on_commit_callbacks
):
    shop = make_company(
        name="Lisbon Barbers", language="en", timezone="Europe/Lisbon", country="PT"
    )
    cut = factories.service(shop)
    barber = factories.marta(shop, cut)
    customer = factories.ana(shop, phone="+351912345678")
    with django_capture_on_commit_callbacks(execute=True):
        appointment_book(
            company=shop,
            contact=customer,
            service=cut,
            professional=barber,
            starts_at=local(2026, 12, 8, 11),  # 10:00 in Lisbon
            created_via=Appointment.Via.STAFF,
        )
    (sms,) = sms_outbox
    assert "To see, change or cancel your appointment: " in sms.body

    text = visible_text(client.get(manage_path(sms.body)).content.decode())

    assert "Your appointment" in text
    assert "Day Tuesday 2026-12-08" in text
    assert "Time 10:00" in text


def test_a_get_or_head_never_changes_anything(client, booked):
    """Link scanners open links (GET, or HEAD) before the customer does."""
    appointment, path = booked
    for suffix in ("", "/cancel", "/move"):
        assert client.get(path + suffix).status_code == 200
        assert client.head(path + suffix).status_code == 200
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    assert appointment.starts_at == TUESDAY_10
    assert not IdempotencyRecord.objects.exists()


def test_cancelling_asks_then_cancels_once_as_the_customer_with_the_usual_message(
    client, booked, sms_outbox, django_capture_on_commit_callbacks
):
    appointment, path = booked
    asked = client.get(path + "/cancel")
    html = asked.content.decode()
    assert "Sí, cancelar la cita" in html and 'name="reason"' in html
    assert "csrfmiddlewaretoken" in html

    form = {"form_token": form_token(html), "reason": "  Me surgió un viaje  "}
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(path + "/cancel", form)

    assert done.status_code == 200
    text = visible_text(done.content.decode())
    assert "Su cita está cancelada." in text and "Estado cancelada" in text
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED
    log = StateLog.objects.filter(object_id=str(appointment.pk), transition="cancel").get()
    assert log.by is None
    assert log.description == f"{HISTORY_NOTE}: Me surgió un viaje"
    assert "ha quedado cancelada" in sms_outbox[-1].body
    assert len(sms_outbox) == 2

    # The same form again (a double tap, a reload): the first answer, nothing twice.
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(path + "/cancel", form)
    assert again.status_code == 200
    assert "Su cita está cancelada." in visible_text(again.content.decode())
    assert len(sms_outbox) == 2
    assert StateLog.objects.filter(object_id=str(appointment.pk), transition="cancel").count() == 1


def test_a_second_form_on_a_cancelled_appointment_shows_its_state_and_changes_nothing(
    client, booked
):
    _appointment, path = booked
    first = form_token(client.get(path + "/cancel").content.decode())
    second = form_token(client.get(path + "/cancel").content.decode())
    client.post(path + "/cancel", {"form_token": first})

    refused = client.post(path + "/cancel", {"form_token": second})

    assert refused.status_code == 422
    text = visible_text(refused.content.decode())
    assert "Esa cita ya está cancelada." in text
    assert "Estado cancelada" in text
    assert "Sí, cancelar la cita" not in text
    # And the page no longer offers any action.
    page = visible_text(client.get(path).content.decode())
    assert "Esta cita está cancelada." in page and "Cambiar de día u hora" not in page


def test_an_attended_appointment_shows_its_state_and_no_action(client, booked, company, now):
    appointment, path = booked
    form = {"form_token": form_token(client.get(path + "/cancel").content.decode())}
    now["at"] = TUESDAY_10 + timedelta(minutes=5)
    appointment_mark_attended(company=company, reference=appointment.reference)

    text = visible_text(client.get(path).content.decode())

    assert "Estado atendida" in text
    assert "Esta cita ya pasó" in text
    assert "Cancelar la cita" not in text
    refused = client.post(path + "/cancel", form)
    assert refused.status_code == 422
    assert "Esa cita ya fue atendida." in visible_text(refused.content.decode())


def test_past_the_cutoff_the_page_says_to_call_and_a_post_is_refused(client, booked, now):
    appointment, path = booked
    form = {"form_token": form_token(client.get(path + "/cancel").content.decode())}
    now["at"] = TUESDAY_10 - timedelta(minutes=90)  # the salon's cut-off is two hours

    text = visible_text(client.get(path).content.decode())
    assert "Ya no es posible cambiar ni cancelar esta cita desde aquí" in text
    assert "Cambiar de día u hora" not in text

    refused = client.post(path + "/cancel", form)
    assert refused.status_code == 422
    assert "Ya no es posible cancelar esta cita por este medio" in visible_text(
        refused.content.decode()
    )
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED


def test_the_move_page_lists_free_slots_of_the_same_service_and_moves_once(
    client, booked, sms_outbox, django_capture_on_commit_callbacks
):
    appointment, path = booked
    page = client.get(path + "/move")
    html = page.content.decode()
    text = visible_text(html)
    assert "Elija la nueva hora" in text
    assert "lunes 07/12/2026" in text  # today, from 09:00 (an hour's notice)
    assert "martes 08/12/2026" in text
    values = slot_values(html)
    assert values
    # Its own slot (Tuesday 10:00 with Marta) is no move, and is not offered.
    assert not any("2026-12-08T09:00:00+00:00" in v for v in values)

    # Tuesday at 11:00 with Marta: the slot whose label says so.
    chosen = next(v for v in values if "2026-12-08T10:00:00+00:00" in v)
    form = {"form_token": form_token(html), "slot": chosen}
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(path + "/move", form)

    assert done.status_code == 200
    assert "Hecho: su cita es ahora el martes 08/12/2026 a las 11:00." in (
        visible_text(done.content.decode())
    )
    appointment.refresh_from_db()
    assert appointment.starts_at == local(2026, 12, 8, 11)
    assert appointment.state == Appointment.State.SCHEDULED
    log = StateLog.objects.filter(object_id=str(appointment.pk), transition="reschedule").get()
    assert log.description == HISTORY_NOTE
    assert "se ha cambiado al martes 08/12/2026 a las 11:00" in sms_outbox[-1].body
    # The moved appointment's confirmation brings its own link, which names the same one.
    assert manage_path(sms_outbox[-1].body) != path
    assert "11:00" in visible_text(client.get(manage_path(sms_outbox[-1].body)).content.decode())

    # A double submit: the same answer, no second move or message.
    sent = len(sms_outbox)
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(path + "/move", form)
    assert again.status_code == 200
    assert len(sms_outbox) == sent
    moves = StateLog.objects.filter(object_id=str(appointment.pk), transition="reschedule")
    assert moves.count() == 1


def test_a_slot_taken_meanwhile_offers_the_nearest_free_ones_and_changes_nothing(
    client, booked, company, service, marta, bruno
):
    appointment, path = booked
    html = client.get(path + "/move").content.decode()
    chosen = next(v for v in slot_values(html) if "2026-12-08T10:00:00+00:00" in v)
    # Bruno books Tuesday at 11:00 while Ana looks at the page.
    appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 11),
        created_via=Appointment.Via.STAFF,
    )

    refused = client.post(path + "/move", {"form_token": form_token(html), "slot": chosen})

    assert refused.status_code == 422
    page = refused.content.decode()
    text = visible_text(page)
    assert "Esa hora ya no está libre. Estas son las horas libres más cercanas:" in text
    assert "Horas libres más cercanas" in text
    offered = slot_values(page)
    assert 0 < len(offered) <= 3
    assert not any("2026-12-08T10:00:00+00:00" in v for v in offered)
    appointment.refresh_from_db()
    assert appointment.starts_at == TUESDAY_10
    # No other customer's data: Bruno's booking is only "not free".
    assert "Bruno" not in page and "López" not in page
    # One of the offered slots works with a fresh form.
    fresh = form_token(client.get(path + "/move").content.decode())
    done = client.post(path + "/move", {"form_token": fresh, "slot": offered[0]})
    assert done.status_code == 200


def test_a_move_past_the_cutoff_is_refused_with_nothing_changed(client, booked, now):
    appointment, path = booked
    html = client.get(path + "/move").content.decode()
    chosen = slot_values(html)[-1]
    now["at"] = TUESDAY_10 - timedelta(minutes=30)

    refused = client.post(path + "/move", {"form_token": form_token(html), "slot": chosen})

    assert refused.status_code == 422
    assert "Ya no es posible cambiar esta cita por este medio" in visible_text(
        refused.content.decode()
    )
    appointment.refresh_from_db()
    assert appointment.starts_at == TUESDAY_10


def test_the_move_page_pages_through_later_dates(client, booked):
    _appointment, path = booked
    html = client.get(path + "/move").content.decode()
    assert "Fechas posteriores" in html and "Fechas anteriores" not in html
    later = client.get(path + "/move?from=2026-12-21")
    text = visible_text(later.content.decode())
    assert "lunes 21/12/2026" in text
    assert "Fechas anteriores" in text
    # A date past the booking horizon says which is the last bookable one.
    for far_day in ("2027-06-01", "9999-12-31"):
        far = visible_text(client.get(path + f"/move?from={far_day}").content.decode())
        assert "Solo se puede reservar con hasta 60 días de antelación" in far
    # A date that is no date shows this week.
    assert "lunes 07/12/2026" in visible_text(
        client.get(path + "/move?from=nonsense").content.decode()
    )
