"""Whom a company texts (core.sms_policy) and the one gate every customer message passes
(core.outbound): the countries it serves, mobile numbers only, the hourly budget with its alert
to the company's administrators, and the sandbox's outbox. Over real HTTP, against a provider:
tests/security/test_sms_attacks.py."""

import ast
import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client
from django.utils import timezone, translation

from agenda.appointment_messages import appointment_message_deliver
from agenda.models import Appointment, AppointmentMessage
from agenda.services import appointment_book
from core.admin.tenants import CompanyForm
from core.errors import ValidationFailed
from core.models import (
    Company,
    Contact,
    OutboxMessage,
    SecurityEvent,
    SmsSend,
    VerificationChallenge,
)
from core.services import contact_change_notice_send, contact_create
from core.sms_policy import SMS_BUDGET_WINDOW, SmsRefusal, sms_budget_take, sms_refusal
from core.verification import challenge_issue
from sales.models import Quote
from sales.services.quote_lifecycle import QuoteItem, quote_create
from tests import factories
from tests.factories import (
    ANA_DOCUMENT,
    ANA_EMAIL,
    ANA_PHONE,
    BRUNO_EMAIL,
    BRUNO_PHONE,
    MONDAY_8AM,
    PASSWORD,
    local,
)
from tests.servers import at_once

pytestmark = pytest.mark.django_db

COUNTRY, NOT_MOBILE, INVALID = (
    SmsRefusal.COUNTRY_NOT_SERVED,
    SmsRefusal.NOT_MOBILE,
    SmsRefusal.INVALID,
)


# --- The rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("country", "served", "phone", "refusal"),
    [
        ("ES", "", ANA_PHONE, None),  # a Spanish mobile
        ("ES", "", "600 111 222", None),  # the same, written nationally
        ("ES", "", "+34911000000", NOT_MOBILE),  # a Madrid landline
        ("ES", "", "+34803123456", NOT_MOBILE),  # premium rate
        ("ES", "", "+34901123456", NOT_MOBILE),  # shared cost
        ("ES", "", "+34700123456", NOT_MOBILE),  # personal number
        ("ES", "", "+34510123456", NOT_MOBILE),  # corporate (UAN)
        ("ES", "", "+19005550123", COUNTRY),  # US premium rate, and not Spain's
        ("ES", "", "+23277000001", COUNTRY),  # a Sierra Leone mobile
        ("ES", "", "+351912345678", COUNTRY),  # a Portuguese mobile: Spain only by default
        ("ES", "ES, PT", "+351912345678", None),  # ... unless the company serves Portugal
        ("ES", "PT", ANA_PHONE, COUNTRY),  # a list replaces the own country
        ("US", "", "+12025550123", None),  # North America cannot tell mobiles apart
        ("US", "", "+19005550123", NOT_MOBILE),  # US premium rate
        ("US", "", "+18765551234", COUNTRY),  # +1 876 is Jamaica, not the US
        ("ES", "", "+3460011122", INVALID),  # a digit short
        ("ES", "", "no es un número", INVALID),
    ],
)
def test_which_numbers_a_company_may_text(country, served, phone, refusal):
    company = Company(country=country, sms_countries=served)

    assert sms_refusal(company=company, phone=phone) == refusal


def test_a_company_lists_the_countries_it_texts_as_iso_codes():
    assert Company(country="ES").sms_regions == {"ES"}
    assert Company(country="es", sms_countries="pt; fr,PT  es").sms_regions == {"PT", "FR", "ES"}
    with pytest.raises(ValidationError) as refused:
        factories.company(sms_countries="ES, XX, EU").full_clean()
    assert "XX, EU" in str(refused.value.message_dict["sms_countries"])


def test_the_company_form_stores_the_countries_in_one_spelling(company):
    data = {
        field.name: getattr(company, field.name)
        for field in Company._meta.fields
        if field.editable and field.name != "id"
    }
    form = CompanyForm(
        data={**data, "sms_countries": "pt es,pt", "sms_hourly_budget": 30}, instance=company
    )

    assert form.is_valid(), form.errors
    form.save()
    company.refresh_from_db()
    assert (company.sms_countries, company.sms_hourly_budget) == ("PT, ES", 30)


# --- Where a phone is entered ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("phone", "code"),
    [
        ("+34 803 123 456", "phone_not_mobile"),
        ("+34 91 100 00 00", "phone_not_mobile"),
        ("+1 900 555 0123", "phone_country_not_served"),
        ("+232 77 000 001", "phone_country_not_served"),
    ],
)
def test_a_contact_with_a_phone_the_company_would_not_text_is_refused_and_not_saved(
    company, phone, code
):
    with pytest.raises(ValidationFailed) as refused:
        contact_create(company=company, first_name="Mallory", phone=phone)

    assert refused.value.code == code
    assert Contact.objects.count() == 0


def test_a_refusal_speaks_the_customers_language(company):
    with pytest.raises(ValidationFailed) as refused:
        contact_create(company=company, first_name="Mallory", phone="+34803123456")
    with translation.override("en"):
        english = str(refused.value.user_message)
    assert "mobile" in english
    assert "móvil" in str(refused.value.user_message)


def test_staff_cannot_type_in_a_premium_number_and_can_still_edit_an_old_contact(
    client: Client, company, make_staff
):
    make_staff("clerk", company, role="agent")
    client.login(username="clerk", password=PASSWORD)
    before = Contact.objects.create(company=company, first_name="Old", phone="+34911000000")
    form = {"company": company.pk, "first_name": "Mallory", "phone": "+34 803 123 456"}

    refused = client.post("/admin/core/contact/add/", form)
    kept = client.post(
        f"/admin/core/contact/{before.pk}/change/",
        {"first_name": "Olga", "phone": before.phone},
    )

    assert refused.status_code == 200  # the form again, with the error by the phone field
    assert refused.context["adminform"].form.errors["phone"]
    assert list(Contact.objects.values_list("first_name", flat=True)) == ["Olga"]
    assert kept.status_code == 302


# --- Where an SMS leaves ---------------------------------------------------------------------


def on_file(company, phone: str, **fields) -> Contact:
    """A contact saved with a phone before the rule existed (no service checks it now)."""
    fields.setdefault("document_number", ANA_DOCUMENT)
    return Contact.objects.create(company=company, first_name="Old", phone=phone, **fields)


# Codes are committed on a connection of their own (core.durable): nothing wraps the test.
@pytest.mark.django_db(transaction=True)
def test_a_code_to_a_number_on_file_the_company_would_not_text_is_not_sent(
    company, sms_outbox, django_capture_on_commit_callbacks
):
    contact = on_file(company, "+34803123456")

    with django_capture_on_commit_callbacks(execute=True):
        challenge_issue(contact=contact, channel="sms")

    assert sms_outbox == []
    challenge = VerificationChallenge.objects.get()
    assert challenge.delivery_status == VerificationChallenge.Delivery.FAILED
    assert challenge.delivery_error.startswith("not sent: phone_not_mobile")


def test_an_appointment_message_to_a_foreign_number_on_file_is_not_sent(company, sms_outbox):
    service = factories.service(company)
    marta = factories.marta(company, service)
    appointment = appointment_book(
        company=company,
        contact=on_file(company, "+23277000001"),
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )
    message = appointment.messages.get(kind=AppointmentMessage.Kind.BOOKED)

    outcome = appointment_message_deliver(message_id=message.pk, last_try=True, now=MONDAY_8AM)

    assert outcome == "failed"
    assert sms_outbox == []
    message.refresh_from_db()
    assert message.status == AppointmentMessage.Status.FAILED
    assert "phone_country_not_served" in message.error


def test_a_change_notice_to_an_old_premium_number_is_not_sent(company, sms_outbox):
    contact = on_file(company, ANA_PHONE)

    sent = contact_change_notice_send(
        contact_id=contact.pk, channel="sms", destination="+34803123456", changed=["phone"]
    )

    assert sent is False
    assert sms_outbox == []


def test_only_the_outbound_gate_hands_a_text_to_the_sms_backend():
    """core.outbound applies the policy and the sandbox's outbox; a direct call would skip
    both (the change notices once called the backend themselves)."""
    root = Path(django_settings.BASE_DIR)
    callers = set()
    for package in ("core", "agenda", "sales", "support", "tooling", "integration", "config"):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name == "sms_send":
                        callers.add(str(path.relative_to(root)))
    assert callers == {"core/outbound.py"}


# --- The hourly budget -----------------------------------------------------------------------


def test_the_budget_stops_sms_past_it_and_tells_the_admins_once_per_window(
    company, make_staff, django_capture_on_commit_callbacks
):
    company.sms_hourly_budget = 2
    company.save()
    make_staff("boss", company, role="admin", email="boss@example.com")
    make_staff("second", company, role="admin", email="second@example.com")
    make_staff("clerk", company, role="agent", email="clerk@example.com")
    make_staff("lead", company, role="supervisor", email="lead@example.com")
    start = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        taken = [
            sms_budget_take(company=company, now=start + timedelta(minutes=n)) for n in range(4)
        ]

    assert taken == [True, True, False, False]
    assert SmsSend.objects.filter(company=company).count() == 2
    [event] = SecurityEvent.objects.filter(kind=SecurityEvent.Kind.SMS_BUDGET_REACHED)
    assert event.detail == {"budget": 2, "window_minutes": 60}
    assert event.staff_notified_at is not None
    [alert] = mail.outbox
    assert sorted(alert.bcc or alert.to) == ["boss@example.com", "second@example.com"]
    # In the company's language (Spanish): the staff strings are written in English.
    assert "límite de SMS por hora" in alert.subject
    assert "los 2 SMS de su límite en 60 minutos" in alert.body


def test_the_budget_is_a_rolling_hour(company, django_capture_on_commit_callbacks):
    company.sms_hourly_budget = 1
    company.save()
    start = timezone.now()
    moments = [
        timedelta(0),  # sent
        SMS_BUDGET_WINDOW - timedelta(seconds=1),  # refused: the first alert
        SMS_BUDGET_WINDOW,  # sent: the first one left the window
        SMS_BUDGET_WINDOW + timedelta(minutes=30),  # refused, within the first alert's hour
        3 * SMS_BUDGET_WINDOW,  # sent
        3 * SMS_BUDGET_WINDOW + timedelta(seconds=1),  # refused: the second alert
    ]

    with django_capture_on_commit_callbacks(execute=True):
        taken = [sms_budget_take(company=company, now=start + moment) for moment in moments]

    assert taken == [True, False, True, False, True, False]
    assert SecurityEvent.objects.filter(kind=SecurityEvent.Kind.SMS_BUDGET_REACHED).count() == 2
    assert len(mail.outbox) == 0  # the company has no administrator with an email
    # Rows that left the window are deleted as new ones come.
    assert SmsSend.objects.filter(company=company).count() == 1


def test_each_company_has_its_own_budget(company, other_company):
    company.sms_hourly_budget = 0
    company.save()

    assert sms_budget_take(company=company) is False
    assert sms_budget_take(company=other_company) is True


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_workers_sending_at_once_never_pass_the_budget(company):
    company.sms_hourly_budget = 3
    company.save()

    taken = at_once(*[lambda: sms_budget_take(company=company)] * 8)

    assert sorted(taken) == [False] * 5 + [True] * 3
    assert SmsSend.objects.count() == 3
    assert SecurityEvent.objects.filter(kind=SecurityEvent.Kind.SMS_BUDGET_REACHED).count() == 1


# --- The sandbox's outbox ---------------------------------------------------------------------


@pytest.fixture
def sandbox(make_company) -> Company:
    return make_company(name="Sandbox", environment=Company.Environment.SANDBOX)


# Codes are committed on a connection of their own (core.durable): nothing wraps the test.
@pytest.mark.django_db(transaction=True)
def test_a_sandbox_keeps_every_customer_message_in_its_outbox(
    sandbox, sms_outbox, django_capture_on_commit_callbacks
):
    ana = factories.ana(sandbox)
    catalog = factories.catalog(sandbox)

    with django_capture_on_commit_callbacks(execute=True):
        challenge_issue(contact=ana, channel="sms")
        challenge_issue(contact=ana, channel="email")
        contact_change_notice_send(
            contact_id=ana.pk, channel="sms", destination=ana.phone, changed=["phone"]
        )
        quote = quote_create(company=sandbox, contact=ana, items=[QuoteItem(catalog.mug.sku, 1)])

    assert sms_outbox == [] and mail.outbox == []
    kept = list(OutboxMessage.objects.order_by("pk").values_list("channel", "destination"))
    assert kept == [
        ("sms", ANA_PHONE),
        ("email", ANA_EMAIL),
        ("sms", ANA_PHONE),
        ("email", ANA_EMAIL),
    ]
    assert Quote.objects.get(pk=quote.pk).emailed_at is not None
    assert (
        VerificationChallenge.objects.filter(
            delivery_status=VerificationChallenge.Delivery.SENT,
            provider_message_id__startswith="outbox-",
        ).count()
        == 2
    )


# Codes are committed on a connection of their own (core.durable): nothing wraps the test.
@pytest.mark.django_db(transaction=True)
def test_the_sandbox_is_held_to_the_same_sms_policy(sandbox, django_capture_on_commit_callbacks):
    contact = on_file(sandbox, "+34803123456")

    with django_capture_on_commit_callbacks(execute=True):
        challenge_issue(contact=contact, channel="sms")

    assert OutboxMessage.objects.count() == 0
    assert "phone_not_mobile" in VerificationChallenge.objects.get().delivery_error


def test_seeding_the_sandbox_texts_no_one(sms_outbox, django_capture_on_commit_callbacks):
    """Before, seed_sandbox texted its made-up customers' numbers (+34600111222) through the
    configured backend: with a real provider, strangers got appointment messages."""
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_sandbox", stdout=io.StringIO())

    assert sms_outbox == [] and mail.outbox == []
    sandbox = Company.objects.get(slug="sandbox")
    kept = set(OutboxMessage.objects.filter(company=sandbox).values_list("channel", "destination"))
    # What the seed's customers would have been told (appointments cancelled, cases resolved)
    # is kept in the sandbox's outbox, addressed to its made-up customers only.
    assert {d for channel, d in kept if channel == "sms"} == {ANA_PHONE, BRUNO_PHONE}
    assert {d for channel, d in kept if channel == "email"} == {ANA_EMAIL, BRUNO_EMAIL}


def test_staff_read_their_own_sandboxes_outbox_and_cannot_change_it(
    client: Client, sandbox, make_company, make_staff
):
    other = make_company(name="Other sandbox", environment=Company.Environment.SANDBOX)
    mine = OutboxMessage.objects.create(
        company=sandbox, channel="sms", destination=ANA_PHONE, body="Su código es 123456."
    )
    theirs = OutboxMessage.objects.create(
        company=other, channel="sms", destination=BRUNO_PHONE, body="Su código es 654321."
    )
    make_staff("clerk", sandbox, role="agent")
    client.login(username="clerk", password=PASSWORD)

    listed = client.get("/admin/core/outboxmessage/")
    page = client.get(f"/admin/core/outboxmessage/{mine.pk}/change/")
    foreign = client.get(f"/admin/core/outboxmessage/{theirs.pk}/change/")
    edited = client.post(f"/admin/core/outboxmessage/{mine.pk}/change/", {"body": "changed"})
    added = client.get("/admin/core/outboxmessage/add/")

    assert listed.status_code == 200
    assert "123456" in listed.content.decode() and "654321" not in listed.content.decode()
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert foreign.status_code == 302  # Django's "does not exist" redirect to the admin index
    assert edited.status_code == 403
    assert added.status_code == 403
    mine.refresh_from_db()
    assert mine.body == "Su código es 123456."
