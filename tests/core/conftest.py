"""Fixtures of the core tests: conversations, identified or not."""

import pytest

from core.identity import identify_contact
from core.models import Conversation


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
