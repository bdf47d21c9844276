"""update_contact_details and confirm_contact_change over real HTTP: step-up first, a code to
the new phone or email, and the change only once that code comes back."""

import re
import uuid

import pytest
from django.core import mail

from core.models import Contact, SecurityEvent
from core.services import contact_create
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE, BRUNO_EMAIL

pytestmark = pytest.mark.django_db(transaction=True)


def call(client, name, arguments):
    return client.call(name, arguments, key=uuid.uuid4().hex)


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def verified(client, outbox):
    call(client, "identify_contact", {"document": ANA_DOCUMENT})
    call(client, "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"})
    code = code_in(outbox[-1].body)
    assert (
        call(client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code}).status_code == 200
    )


def emailed_code(to: str) -> str:
    [message] = [m for m in mail.outbox if m.to == [to]]
    return code_in(message.body)


def test_changing_contact_details_needs_a_verification_code_first(tool_client, ana):
    call(tool_client, "identify_contact", {"document": ANA_DOCUMENT})

    asked = call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": "new@example.com"},
    )
    confirmed = call(
        tool_client, "confirm_contact_change", {"identifier": ANA_DOCUMENT, "code": "123456"}
    )

    assert (asked.status_code, confirmed.status_code) == (403, 403)
    assert asked.json()["code"] == confirmed.json()["code"] == "verification_required"
    ana.refresh_from_db()
    assert ana.email == ANA_EMAIL
    assert mail.outbox == []


def test_a_new_email_is_saved_only_once_the_code_sent_to_it_comes_back(
    tool_client, ana, sms_outbox
):
    verified(tool_client, sms_outbox)

    asked = call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": " New@Example.com "},
    )

    assert asked.status_code == 200
    assert asked.json() == {
        "updated": False,
        "channel": "email",
        "sent_to": "n***@example.com",
        "expires_in_minutes": 10,
    }
    assert Contact.objects.get(pk=ana.pk).email == ANA_EMAIL
    code = emailed_code("new@example.com")

    confirmed = call(
        tool_client, "confirm_contact_change", {"identifier": ANA_DOCUMENT, "code": code}
    )

    assert confirmed.status_code == 200
    assert confirmed.json() == {
        "updated": True,
        "phone": "teléfono terminado en 22",
        "email": "n***@example.com",
    }
    assert Contact.objects.get(pk=ana.pk).email == "new@example.com"


def test_a_new_phone_gets_its_code_by_sms_and_is_saved_in_e164(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)

    asked = call(
        tool_client, "update_contact_details", {"identifier": ANA_DOCUMENT, "phone": "611 22 33 44"}
    )
    [text] = [m for m in sms_outbox if m.to == "+34611223344"]
    confirmed = call(
        tool_client,
        "confirm_contact_change",
        {"identifier": ANA_DOCUMENT, "code": code_in(text.body)},
    )

    assert asked.json()["sent_to"] == "teléfono terminado en 44"
    assert "nuevo teléfono de contacto" in text.body
    assert confirmed.json()["phone"] == "teléfono terminado en 44"
    assert Contact.objects.get(pk=ana.pk).phone == "+34611223344"


def test_another_customers_email_is_refused_only_after_its_code_came_back(
    tool_client, ana, company, sms_outbox
):
    bruno = contact_create(company=company, first_name="Bruno", email=BRUNO_EMAIL)
    verified(tool_client, sms_outbox)

    asked = call(
        tool_client, "update_contact_details", {"identifier": ANA_DOCUMENT, "email": BRUNO_EMAIL}
    )
    confirmed = call(
        tool_client,
        "confirm_contact_change",
        {"identifier": ANA_DOCUMENT, "code": emailed_code(BRUNO_EMAIL)},
    )

    assert asked.status_code == 200 and asked.json()["updated"] is False
    assert confirmed.status_code == 422
    assert confirmed.json()["code"] == "identifier_taken"
    assert "Bruno" not in confirmed.text
    assert Contact.objects.get(pk=ana.pk).email == ANA_EMAIL
    event = SecurityEvent.objects.get(kind=SecurityEvent.Kind.CONTACT_CHANGE_TAKEN)
    assert (event.contact_id, event.claimed_contact_id) == (ana.pk, bruno.pk)


def test_nothing_to_change_is_a_validation_error(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)

    response = call(tool_client, "update_contact_details", {"identifier": ANA_DOCUMENT})

    assert response.status_code == 422
    assert response.json()["code"] == "nothing_to_change"


def test_the_phone_and_the_email_are_changed_one_at_a_time(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)
    codes_sent = len(sms_outbox)

    response = call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": "new@example.com", "phone": "611223344"},
    )

    assert response.status_code == 422
    assert response.json()["code"] == "one_change_at_a_time"
    assert len(sms_outbox) == codes_sent and mail.outbox == []


def test_the_old_phone_is_told_when_a_new_one_is_confirmed(tool_client, ana, sms_outbox):
    """A takeover that changes the customer's channels cannot go unnoticed: the old one hears
    of it, through Celery, once the change is saved."""
    verified(tool_client, sms_outbox)
    call(tool_client, "update_contact_details", {"identifier": ANA_DOCUMENT, "phone": "611223344"})
    codes_sent = len(sms_outbox)

    call(
        tool_client,
        "confirm_contact_change",
        {"identifier": ANA_DOCUMENT, "code": code_in(sms_outbox[-1].body)},
    )

    notices = sms_outbox[codes_sent:]
    assert [m.to for m in notices] == [ANA_PHONE]
    assert "se ha cambiado su teléfono" in notices[0].body
    assert mail.outbox == []


def test_the_old_email_is_told_when_a_new_one_is_confirmed(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)
    call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": "new@example.com"},
    )
    codes_sent = len(sms_outbox)

    call(
        tool_client,
        "confirm_contact_change",
        {"identifier": ANA_DOCUMENT, "code": emailed_code("new@example.com")},
    )

    notices = [m for m in mail.outbox if m.to == [ANA_EMAIL]]
    assert len(notices) == 1
    assert "cambio de sus datos de contacto" in notices[0].subject
    assert len(sms_outbox) == codes_sent


def test_an_english_company_tells_the_old_email_in_english(tool_client, ana, company, sms_outbox):
    company.language = "en"
    company.save()
    verified(tool_client, sms_outbox)
    call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": "new@example.com"},
    )
    code = emailed_code("new@example.com")

    call(tool_client, "confirm_contact_change", {"identifier": ANA_DOCUMENT, "code": code})

    [to_new] = [m for m in mail.outbox if m.to == ["new@example.com"]]
    [notice] = [m for m in mail.outbox if m.to == [ANA_EMAIL]]
    assert "new contact email" in to_new.body
    assert "your email" in notice.body


def test_a_refused_change_tells_nobody(tool_client, ana, company, sms_outbox):
    contact_create(company=company, first_name="Bruno", email=BRUNO_EMAIL)
    verified(tool_client, sms_outbox)
    codes_sent = len(sms_outbox)
    call(tool_client, "update_contact_details", {"identifier": ANA_DOCUMENT, "email": BRUNO_EMAIL})

    call(
        tool_client,
        "confirm_contact_change",
        {"identifier": ANA_DOCUMENT, "code": emailed_code(BRUNO_EMAIL)},
    )

    assert [m.to for m in mail.outbox] == [[BRUNO_EMAIL]]  # the code, nothing more
    assert len(sms_outbox) == codes_sent
