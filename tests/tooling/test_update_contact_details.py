"""update_contact_details over real HTTP: step-up first, then normalised, never someone else's."""

import re
import uuid

import pytest
from django.core import mail

from core.models import Contact
from core.services import contact_create

pytestmark = pytest.mark.django_db(transaction=True)

ANA = "12345678Z"


def call(client, name, arguments):
    return client.call(name, arguments, key=uuid.uuid4().hex)


def verified(client, outbox):
    call(client, "identify_contact", {"document": ANA})
    call(client, "request_verification_code", {"identifier": ANA, "channel": "sms"})
    code = re.search(r"\b(\d{6})\b", outbox[-1].body).group(1)
    assert call(client, "verify_code", {"identifier": ANA, "code": code}).status_code == 200


def test_changing_contact_details_needs_a_verification_code_first(tool_client, ana):
    call(tool_client, "identify_contact", {"document": ANA})

    response = call(
        tool_client, "update_contact_details", {"identifier": ANA, "email": "new@example.com"}
    )

    assert response.status_code == 403
    assert response.json()["code"] == "verification_required"
    ana.refresh_from_db()
    assert ana.email == "ana@example.com"


def test_a_verified_customer_changes_their_email_and_phone(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)

    response = call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA, "email": " New@Example.com ", "phone": "611 22 33 44"},
    )

    assert response.status_code == 200
    assert response.json() == {
        "updated": True,
        "phone": "teléfono terminado en 44",
        "email": "n***@example.com",
    }
    ana.refresh_from_db()
    assert (ana.email, ana.phone) == ("new@example.com", "+34611223344")


def test_another_customers_email_cannot_be_taken(tool_client, ana, company, sms_outbox):
    contact_create(company=company, first_name="Bruno", email="bruno@example.com")
    verified(tool_client, sms_outbox)

    response = call(
        tool_client, "update_contact_details", {"identifier": ANA, "email": "bruno@example.com"}
    )

    assert response.status_code == 422
    assert response.json()["code"] == "identifier_taken"
    assert "Bruno" not in response.text
    assert Contact.objects.get(pk=ana.pk).email == "ana@example.com"


def test_nothing_to_change_is_a_validation_error(tool_client, ana, sms_outbox):
    verified(tool_client, sms_outbox)

    response = call(tool_client, "update_contact_details", {"identifier": ANA})

    assert response.status_code == 422
    assert response.json()["code"] == "nothing_to_change"


def test_the_old_phone_and_the_old_email_are_told_of_the_change(tool_client, ana, sms_outbox):
    """A takeover that changes the customer's channels cannot go unnoticed: the old ones hear
    of it, through Celery, once the change is saved."""
    verified(tool_client, sms_outbox)
    codes_sent = len(sms_outbox)

    call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA, "email": "new@example.com", "phone": "611223344"},
    )

    notices = sms_outbox[codes_sent:]
    assert [m.to for m in notices] == ["+34600111222"]
    assert "teléfono y su correo electrónico" in notices[0].body
    assert [m.to for m in mail.outbox] == [["ana@example.com"]]
    assert "cambio de sus datos de contacto" in mail.outbox[0].subject


def test_an_english_company_tells_the_old_email_in_english(tool_client, ana, company, sms_outbox):
    company.language = "en"
    company.save()
    verified(tool_client, sms_outbox)

    call(tool_client, "update_contact_details", {"identifier": ANA, "email": "new@example.com"})

    assert [m.to for m in mail.outbox] == [["ana@example.com"]]
    assert "your email" in mail.outbox[0].body
    assert len([m for m in sms_outbox if "verification code" not in m.body]) == 0


def test_a_refused_change_tells_nobody(tool_client, ana, company, sms_outbox):
    contact_create(company=company, first_name="Bruno", email="bruno@example.com")
    verified(tool_client, sms_outbox)
    codes_sent = len(sms_outbox)

    call(tool_client, "update_contact_details", {"identifier": ANA, "email": "bruno@example.com"})

    assert mail.outbox == []
    assert len(sms_outbox) == codes_sent
