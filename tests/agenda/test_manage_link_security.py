"""The manage-my-booking link's defences: forged, expired, replayed and cross-tenant links,
the rate limits per link and per address, CSRF, and the pages' security headers. Each refusal
is a clear page and changes nothing."""

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.test import Client

from agenda import clock
from agenda.models import Appointment
from agenda.services import appointment_book
from core.customer_links import link_key_new, link_token
from core.models import IdempotencyRecord
from tests import factories
from tests.customer_links import PUBLIC_URL, form_token, manage_path, slot_values, visible_text
from tests.factories import MONDAY_8AM, local

pytestmark = pytest.mark.django_db

TUESDAY_10 = local(2026, 12, 8, 10)


@pytest.fixture(autouse=True)
def links_on(settings):
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
def book(now, sms_outbox, django_capture_on_commit_callbacks):
    """Book and return (appointment, the path of its confirmation's manage link)."""

    def book(company, service, professional, contact, starts_at=TUESDAY_10):
        sms_outbox.clear()
        with django_capture_on_commit_callbacks(execute=True):
            appointment = appointment_book(
                company=company,
                contact=contact,
                service=service,
                professional=professional,
                starts_at=starts_at,
                created_via=Appointment.Via.GATEWAY,
            )
        return appointment, manage_path(sms_outbox[0].body)

    return book


@pytest.fixture
def booked(book, company, service, marta, ana):
    return book(company, service, marta, ana)


def unchanged(appointment: Appointment) -> bool:
    appointment.refresh_from_db()
    return appointment.state == Appointment.State.SCHEDULED and appointment.starts_at == TUESDAY_10


@pytest.mark.parametrize(
    "forge",
    [
        lambda token: token[:-1] + ("A" if token[-1] != "A" else "B"),  # its tag altered
        lambda token: ("A" if token[0] != "A" else "B") + token[1:],  # its key altered
        lambda token: token[:-5],  # cut short (a wrapped SMS)
        lambda token: link_token(link_key_new(), "manage"),  # well signed, names nothing
        lambda token: link_token(token[:24], "quote"),  # the key signed for another page
    ],
    ids=["tag", "key", "short", "unknown-key", "other-purpose"],
)
def test_a_forged_link_shows_the_invalid_page_and_changes_nothing(client, booked, forge):
    appointment, path = booked
    forged = "/a/" + forge(path.rsplit("/", 1)[1])

    for suffix in ("", "/cancel", "/move"):
        page = client.get(forged + suffix)
        assert page.status_code == 404
        text = visible_text(page.content.decode())
        assert "Enlace no válido" in text
        assert "Corte de pelo" not in text and "Peluquería Sol" not in text
    refused = client.post(forged + "/cancel", {"form_token": "x"})
    assert refused.status_code == 404
    assert unchanged(appointment)


def test_an_opt_out_key_is_no_manage_link(client, booked, sms_outbox):
    appointment, _path = booked
    opt_out_key = sms_outbox[0].body.rsplit("/", 1)[1]
    assert client.get(f"/a/{opt_out_key}").status_code == 404
    assert unchanged(appointment)


def test_a_link_past_the_appointments_end_has_expired_and_changes_nothing(client, booked, now):
    appointment, path = booked
    form = {"form_token": form_token(client.get(path + "/cancel").content.decode())}
    now["at"] = appointment.ends_at

    page = client.get(path)
    assert page.status_code == 410
    text = visible_text(page.content.decode())
    assert "Enlace caducado" in text and "la cita a la que se refiere ya terminó" in text
    assert "Corte de pelo" not in text
    refused = client.post(path + "/cancel", form)
    assert refused.status_code == 410
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED


def test_a_moved_appointment_keeps_its_links_until_its_new_end(
    client, booked, company, now, django_capture_on_commit_callbacks
):
    _appointment, path = booked
    html = client.get(path + "/move").content.decode()
    later = next(v for v in slot_values(html) if "2026-12-08T15:00:00+00:00" in v)  # 16:00
    with django_capture_on_commit_callbacks(execute=True):
        client.post(path + "/move", {"form_token": form_token(html), "slot": later})
    now["at"] = TUESDAY_10 + timedelta(hours=1)  # past the old end, before the new start
    assert client.get(path).status_code == 200
    now["at"] = local(2026, 12, 8, 16, 30)
    assert client.get(path).status_code == 410


def test_a_replayed_form_changes_nothing_twice_and_another_forms_data_is_a_conflict(client, booked):
    appointment, path = booked
    html = client.get(path + "/move").content.decode()
    token = form_token(html)
    first, second = slot_values(html)[:2]
    assert client.post(path + "/move", {"form_token": token, "slot": first}).status_code == 200
    appointment.refresh_from_db()
    moved_to = appointment.starts_at

    # The same form, with another slot: one form is one change.
    conflict = client.post(path + "/move", {"form_token": token, "slot": second})

    assert conflict.status_code == 409
    assert "Ese formulario ya se envió. Vuelva a abrir la página para hacer otro cambio." in (
        visible_text(conflict.content.decode())
    )
    appointment.refresh_from_db()
    assert appointment.starts_at == moved_to
    assert IdempotencyRecord.objects.count() == 1


def test_a_form_left_open_too_long_is_refused_and_changes_nothing(client, booked, settings):
    appointment, path = booked
    token = form_token(client.get(path + "/cancel").content.decode())
    settings.GARANTE_CUSTOMER_LINK_FORM_MAX_AGE = -1

    refused = client.post(path + "/cancel", {"form_token": token})

    assert refused.status_code == 400
    assert "Esta página llevaba demasiado tiempo abierta" in visible_text(refused.content.decode())
    assert unchanged(appointment)


@pytest.fixture
def luna(book, other_company):
    """An appointment at another company (Clínica Luna) and its link."""
    service = factories.service(other_company)
    professional = factories.marta(other_company, service)
    contact = factories.bruno(other_company)
    return book(other_company, service, professional, contact)


def test_a_link_shows_only_its_own_appointment_and_company(client, booked, luna):
    _appointment, path = booked
    _other, other_path = luna
    ours = visible_text(client.get(path).content.decode())
    theirs = visible_text(client.get(other_path).content.decode())
    assert "Peluquería Sol" in ours and "Clínica Luna" not in ours
    assert "Clínica Luna" in theirs and "Peluquería Sol" not in theirs


def test_another_companys_form_or_slot_does_nothing_on_this_link(client, booked, luna):
    appointment, path = booked
    other, other_path = luna
    their_html = client.get(other_path + "/move").content.decode()
    their_token = form_token(their_html)
    their_slot = slot_values(their_html)[0]

    wrong_form = client.post(path + "/cancel", {"form_token": their_token})
    assert wrong_form.status_code == 400
    assert "Ese formulario no es de esta página" in visible_text(wrong_form.content.decode())

    our_token = form_token(client.get(path + "/move").content.decode())
    wrong_slot = client.post(path + "/move", {"form_token": our_token, "slot": their_slot})
    assert wrong_slot.status_code == 422
    assert "Elija una de las horas libres de la lista." in visible_text(wrong_slot.content.decode())
    assert unchanged(appointment)
    other.refresh_from_db()
    assert other.state == Appointment.State.SCHEDULED and other.starts_at == TUESDAY_10


def test_a_post_without_the_csrf_token_is_refused(booked):
    appointment, path = booked
    browser = Client(enforce_csrf_checks=True)
    token = form_token(browser.get(path + "/cancel").content.decode())

    refused = browser.post(path + "/cancel", {"form_token": token})

    assert refused.status_code == 403
    assert unchanged(appointment)


def test_the_pages_carry_the_apps_security_headers_and_are_never_cached(client, booked):
    _appointment, path = booked
    for page in (client.get(path), client.get(path + "/move"), client.get("/a/nothing")):
        assert page["X-Frame-Options"] == "DENY"
        assert page["X-Content-Type-Options"] == "nosniff"
        assert page["Referrer-Policy"] == "same-origin"
        assert page["Cache-Control"] == "no-store, private"
        assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
        assert "script-src" not in page["Content-Security-Policy"]  # default-src 'none'


def test_requests_are_limited_per_link(client, booked, settings):
    appointment, path = booked
    settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK = (3, 600)
    token = form_token(client.get(path + "/cancel").content.decode())
    assert client.get(path).status_code == 200
    assert client.get(path + "/move").status_code == 200

    limited = client.post(path + "/cancel", {"form_token": token})

    assert limited.status_code == 429
    assert int(limited["Retry-After"]) > 0
    assert "Demasiadas peticiones" in visible_text(limited.content.decode())
    assert unchanged(appointment)
    # From another address too: the link's own limit.
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert elsewhere.get(path).status_code == 429


def test_requests_are_limited_per_client_address(client, booked, settings):
    _appointment, path = booked
    settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS = (5, 600)
    # Guessing links: made-up tokens count against the address that sends them.
    for n in range(5):
        assert client.get(f"/a/{'x' * 39}{n}").status_code == 404

    assert client.get(path).status_code == 429
    # Another address is not held back by this one's guesses.
    assert Client(REMOTE_ADDR="198.51.100.7").get(path).status_code == 200


def test_behind_the_proxy_the_limit_counts_the_forwarded_address(client, booked, settings):
    _appointment, path = booked
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS = (2, 600)
    proxied = {"HTTP_X_FORWARDED_PROTO": "https", "REMOTE_ADDR": "10.0.0.2"}
    for _n in range(2):
        assert client.get(path, HTTP_X_FORWARDED_FOR="203.0.113.5", **proxied).status_code == 200
    assert client.get(path, HTTP_X_FORWARDED_FOR="203.0.113.5", **proxied).status_code == 429
    # Another customer behind the same proxy.
    assert client.get(path, HTTP_X_FORWARDED_FOR="203.0.113.9", **proxied).status_code == 200
