"""Fixtures of the core tests: two contacts of one company and identified conversations."""

import pytest

from core.identity import identify_contact
from core.models import Conversation
from core.services import contact_create
from core.sms import LocmemBackend


@pytest.fixture
def ana(company):
    return contact_create(
        company=company,
        first_name="Ana",
        last_name="García",
        document_number="12345678Z",
        phone="600111222",
        email="ana@example.com",
    )


@pytest.fixture
def bruno(company):
    return contact_create(
        company=company,
        first_name="Bruno",
        document_number="X1234567L",
        phone="600333444",
        email="bruno@example.com",
    )


@pytest.fixture
def conversation(company):
    return Conversation.objects.create(company=company, external_id="conv-1")


@pytest.fixture
def make_identified():
    """A conversation of the contact's company identified as that contact."""

    def make(contact, external_id):
        conversation = Conversation.objects.create(company=contact.company, external_id=external_id)
        identify_contact(conversation=conversation, kind="document", value=contact.document_number)
        conversation.refresh_from_db()
        return conversation

    return make


@pytest.fixture
def sms_outbox(settings):
    settings.GARANTE_SMS_BACKEND = "locmem"
    LocmemBackend.outbox.clear()
    yield LocmemBackend.outbox
    LocmemBackend.outbox.clear()
