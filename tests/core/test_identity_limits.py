"""The limits on failed identifications per credential and per identifier value, in process:
what a limited answer and an answer in verified mode send to the database, failures at once,
the sliding window, one burst event per burst and its staff email."""

import itertools
from datetime import timedelta
from functools import partial

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.utils import timezone

from core.durable import keeping_evidence
from core.errors import NotFound, PermissionRefused
from core.identity import identify_contact
from core.models import Company, Conversation, SecurityEvent
from core.roles import staff_membership_set
from core.security import security_event_notices_pending, security_event_staff_notify
from core.services import gateway_credential_issue
from tests.factories import ANA_PHONE, ANA_PHONE_NATIONAL
from tests.servers import at_once
from tests.statements import call_statements, shape

pytestmark = pytest.mark.django_db(transaction=True)

Kind = SecurityEvent.Kind
_conversations = itertools.count(1)
_phones = itertools.count(699_100_001)


@pytest.fixture
def credential(company):
    return gateway_credential_issue(company=company, name="gateway")[0]


@pytest.fixture
def gateway_company(company, credential):
    """The company as authentication hands it to a call: with the credential it came by."""
    fresh = Company.objects.get(pk=company.pk)
    fresh.gateway_credential_id = credential.pk
    return fresh


def events(company):
    """The company's security events (durable writes of earlier tests may remain)."""
    return SecurityEvent.objects.filter(company_id=company.pk)


def attempt(company, value=None, conversation_id=None):
    """identify_contact as a tool call makes it: in a unit of work an error rolls back, keeping
    its evidence (core.durable). "verified_mode" when it answers by sending a code (if the
    phone is anyone's)."""
    conversation, _ = Conversation.objects.get_or_create(
        company=company, external_id=conversation_id or f"conv-{next(_conversations)}"
    )
    conversation.company = company
    try:
        contact = keeping_evidence(
            lambda: identify_contact(
                conversation=conversation, kind="phone", value=value or str(next(_phones))
            )
        )
    except (NotFound, PermissionRefused) as refused:
        return refused.code
    return "verified_mode" if contact is None else "identified"


def test_failures_at_once_from_many_conversations_do_not_pass_the_credential_limit(
    gateway_company, ana
):
    gateway_company.identify_failures_per_credential = 5
    Company.objects.filter(pk=gateway_company.pk).update(identify_failures_per_credential=5)

    answers = at_once(*[partial(attempt, gateway_company) for _ in range(12)])

    # Those finding the limit reached while recording answer in verified mode, not counted.
    assert sorted(answers) == ["contact_not_found"] * 5 + ["verified_mode"] * 7
    assert events(gateway_company).filter(kind=Kind.IDENTIFICATION_FAILED).count() == 5
    assert events(gateway_company).filter(kind=Kind.IDENTIFICATION_BURST).count() == 1


def test_failures_older_than_the_window_no_longer_count(gateway_company, ana):
    gateway_company.identify_failures_per_credential = 3
    for _ in range(3):
        attempt(gateway_company)
    assert attempt(gateway_company, ANA_PHONE_NATIONAL) == "verified_mode"

    events(gateway_company).update(created_at=timezone.now() - timedelta(minutes=61))

    assert attempt(gateway_company, ANA_PHONE_NATIONAL) == "identified"


def test_a_burst_raises_one_event_however_long_it_goes_on_within_the_window(
    gateway_company, ana, company
):
    user = get_user_model().objects.create_user("marta", email="marta@example.com")
    staff_membership_set(user=user, company=company, role="admin")
    # Only administrators may revoke a credential: the others are not asked to.
    agent = get_user_model().objects.create_user("pablo", email="pablo@example.com")
    staff_membership_set(user=agent, company=company, role="agent")
    gateway_company.identify_failures_per_credential = 3
    for _ in range(3):
        attempt(gateway_company)
    # The oldest failure leaves the window: one more try, failing, reaches the limit again.
    oldest = events(gateway_company).filter(kind=Kind.IDENTIFICATION_FAILED).order_by("pk")[0]
    events(gateway_company).filter(pk=oldest.pk).update(
        created_at=timezone.now() - timedelta(minutes=61)
    )
    assert attempt(gateway_company) == "contact_not_found"
    assert events(gateway_company).filter(kind=Kind.IDENTIFICATION_BURST).count() == 1

    # A burst an hour later is another one.
    events(gateway_company).update(created_at=timezone.now() - timedelta(minutes=61))
    for _ in range(3):
        attempt(gateway_company)

    assert events(gateway_company).filter(kind=Kind.IDENTIFICATION_BURST).count() == 2
    assert len(mail.outbox) == 2
    assert mail.outbox[0].bcc == ["marta@example.com"]
    assert "gateway" in mail.outbox[0].body


def test_a_burst_notice_lost_on_its_way_is_sent_by_the_sweep_once(gateway_company, company):
    user = get_user_model().objects.create_user("marta", email="marta@example.com")
    staff_membership_set(user=user, company=company, role="admin")
    gateway_company.identify_failures_per_credential = 2
    for _ in range(2):
        attempt(gateway_company)
    burst = events(gateway_company).get(kind=Kind.IDENTIFICATION_BURST)
    events(gateway_company).filter(pk=burst.pk).update(staff_notified_at=None)  # as if lost
    mail.outbox.clear()

    later = timezone.now() + timedelta(minutes=5)
    assert burst.pk in security_event_notices_pending(now=later)
    assert security_event_staff_notify(event_id=burst.pk) == 1
    assert security_event_staff_notify(event_id=burst.pk) == 0
    assert burst.pk not in security_event_notices_pending(now=later)
    assert len(mail.outbox) == 1


def test_failures_without_a_credential_count_per_conversation_and_identifier_only(company, ana):
    """Outside the tool API (no gateway credential) the other two limits still hold."""
    company.identify_failures_per_identifier = 2
    tried = "699999999"
    answers = [attempt(company, tried) for _ in range(3)]

    assert answers == ["contact_not_found"] * 2 + ["verified_mode"]
    assert not events(company).filter(kind=Kind.IDENTIFICATION_BURST).exists()


@pytest.mark.postgres
def test_in_verified_mode_a_customer_and_nobody_send_the_same_statements(
    gateway_company, ana, sms_outbox
):
    """The lookup is made for both, and both write a code (nobody's goes nowhere): the same
    answer, the same statements in the same order, so the same database work and time."""
    gateway_company.identify_failures_per_credential = 2
    for _ in range(2):
        attempt(gateway_company)

    customer, customer_sql = call_statements(
        gateway_company, "identify_contact", {"phone": ANA_PHONE_NATIONAL}, conversation_id="conv-a"
    )
    nobody, nobody_sql = call_statements(
        gateway_company, "identify_contact", {"phone": "699888777"}, conversation_id="conv-b"
    )

    assert customer.body == nobody.body
    assert customer.body["awaiting_code"] is True
    shapes = [shape(sql) for sql in customer_sql]
    assert shapes == [shape(sql) for sql in nobody_sql]
    # The lookup is made in the limits' statement, beside them.
    (limits,) = [sql for sql in customer_sql if '"core_securityevent"' in sql]
    assert '"core_contact"' in limits
    assert "INSERT core_verificationchallenge" in shapes
    assert "UPDATE core_conversation" not in shapes  # bound by verify_code only
    assert [m.to for m in sms_outbox] == [ANA_PHONE]
    assert connection.vendor == "postgresql"


@pytest.mark.postgres
def test_the_conversations_own_limit_is_decided_before_the_lookup(gateway_company, ana):
    """Refused on the limits' statement (the lookup beside them is made for both): the
    database work, and so its timing, is the same."""
    gateway_company.identify_failures_per_conversation = 2
    for _ in range(2):
        attempt(gateway_company, conversation_id="conv-a")

    customer, customer_sql = call_statements(
        gateway_company, "identify_contact", {"phone": ANA_PHONE_NATIONAL}, conversation_id="conv-a"
    )
    nobody, nobody_sql = call_statements(
        gateway_company, "identify_contact", {"phone": "699888777"}, conversation_id="conv-a"
    )

    assert customer.body["code"] == nobody.body["code"] == "too_many_attempts"
    assert [shape(sql) for sql in customer_sql] == [shape(sql) for sql in nobody_sql]
    assert "SELECT core_contact" not in [shape(sql) for sql in customer_sql]
