"""Fixtures of the core tests: a conversation not identified yet (identified ones:
`make_identified` and `ana_conv`, tests/conftest.py)."""

import pytest

from core.models import Conversation


@pytest.fixture
def conversation(company):
    return Conversation.objects.create(company=company, external_id="conv-1")
