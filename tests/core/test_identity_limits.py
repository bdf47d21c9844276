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
from core.identity.limits import (
    Attempt,
    Beside,
    Standing,
    TooManyAttempts,
    VerifiedModeStands,
    attempt_standing,
    failure_record,
    identifier_digest,
    too_many_attempts,
)
from core.identity.ownership import contact_for_conversation
from core.models import Company, Conversation, SecurityEvent
from core.roles import staff_membership_set
from core.security import security_event_notices_pending, security_event_staff_notify
from core.services import gateway_credential_issue
from tests.factories import ANA_PHONE, ANA_PHONE_NATIONAL
from tests.servers import at_once
from tests.statements import call_statements, shape
from tests.wording import told_in_its_own_words

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


# --- The limits in process, in the fast suite (the test's own transaction) ---
#
# Each asserts what a caller or staff would notice of core.identity.limits: the wait given, the
# mode chosen, the refusal's code and fields, the rows written field by field, the locks held.

fast = pytest.mark.django_db  # the closest mark wins over the module's transaction=True
MINUTE = timedelta(minutes=1)


def conversation_of(company, external_id):
    """A conversation of `company` as a call holds it (the company with its limits as set)."""
    conversation = Conversation.objects.create(company=company, external_id=external_id)
    conversation.company = company
    return conversation


def failed_at(company, at, *, conversation_key="conv-other", credential=None, digest=""):
    """A failed identification on record, made `at` that instant."""
    return SecurityEvent.objects.create(
        company=company,
        conversation_key=conversation_key,
        kind=Kind.IDENTIFICATION_FAILED,
        credential=credential,
        identifier_digest=digest,
        created_at=at,
    )


def burst_at(company, credential, at):
    return SecurityEvent.objects.create(
        company=company,
        conversation_key="conv-burst",
        kind=Kind.IDENTIFICATION_BURST,
        credential=credential,
        created_at=at,
    )


def with_credential(company, name="gateway"):
    credential = gateway_credential_issue(company=company, name=name)[0]
    company.gateway_credential_id = credential.pk
    return credential


@fast
def test_an_identifiers_digest_stays_the_one_stored(settings):
    """Failures and pending codes keep the digest they were stored with: a digest computed
    another way after an upgrade would reset every identifier value's count and orphan the
    codes awaiting verification. Each company and each value has its own."""
    settings.SECRET_KEY = "garante-tests-a-fixed-secret-key-for-stored-digests"

    digest = identifier_digest(company_id=7, value="+34600111222")

    assert digest == "33c090eb5cfcc2e10307a862fbecaff85803fd22b3b5c2c0ce3fbc9b08c548a2"
    assert identifier_digest(company_id=8, value="+34600111222") != digest
    assert identifier_digest(company_id=7, value="+34600111223") != digest


@fast
def test_an_attempt_carries_each_value_tried_once_as_its_companys_digest(company):
    credential = with_credential(company)
    conversation = conversation_of(company, "conv-of")

    attempt = Attempt.of(conversation, ["b@example.com", "+34600111222", "b@example.com"])

    assert attempt.conversation is conversation
    assert attempt.credential_id == credential.pk
    assert attempt.digests == tuple(
        sorted(
            identifier_digest(company_id=company.pk, value=v)
            for v in ("b@example.com", "+34600111222")
        )
    )


@fast
def test_the_refusal_at_a_limit_says_when_to_retry_in_the_companys_language():
    refused = too_many_attempts(42)

    assert (refused.error_type, refused.code) == ("PERMISSION", "too_many_attempts")
    assert refused.extras == {"retry_after_seconds": 42}
    told_in_its_own_words(refused)


@fast
def test_the_wait_lasts_until_the_oldest_of_the_last_failures_leaves_the_window(company):
    """Four failures in the window of a limit of three: the conversation waits for the third
    newest to leave it (the fourth left no wait of its own), rounded up; older ones count not."""
    company.identify_failures_per_conversation = 3
    company.identify_conversation_window_minutes = 10
    conversation = conversation_of(company, "conv-wait")
    now = timezone.now()
    for minutes in (11, 9.5, 9, 5, 1):
        failed_at(company, now - minutes * MINUTE, conversation_key="conv-wait")

    standing = attempt_standing(Attempt.of(conversation, ["600111222"]), now)

    assert (standing.conversation_wait, standing.shared_wait) == (60 + 1, None)
    assert (standing.longest_wait, standing.verified_mode) == (61, False)


@fast
def test_a_wait_is_at_least_a_second_and_no_more_than_what_is_left(company):
    company.identify_failures_per_conversation = 2
    company.identify_conversation_window_minutes = 10
    conversation = conversation_of(company, "conv-edge")
    now = timezone.now()
    almost_out = now - 10 * MINUTE + timedelta(milliseconds=500)
    for _ in range(2):
        failed_at(company, almost_out, conversation_key="conv-edge")

    standing = attempt_standing(Attempt.of(conversation, ["600111222"]), now)

    assert standing.conversation_wait == 1
    assert attempt_standing(Attempt.of(conversation, ["600111222"]), now + MINUTE) == Standing(
        None, None
    )


@fast
def test_past_a_shared_limit_the_wait_is_the_longest_of_the_credentials_and_the_values(company):
    credential = with_credential(company)
    company.identify_failures_per_credential = 2
    company.identify_credential_window_minutes = 30
    company.identify_failures_per_identifier = 2
    company.identify_identifier_window_minutes = 20
    conversation = conversation_of(company, "conv-shared")
    attempt = Attempt.of(conversation, ["600111222"])
    (digest,) = attempt.digests
    now = timezone.now()
    for minutes in (25, 1):  # the credential's: 5 minutes left
        failed_at(company, now - minutes * MINUTE, credential=credential)
    for minutes in (10, 2):  # the value's, through no credential: 10 minutes left
        failed_at(company, now - minutes * MINUTE, digest=digest)

    standing = attempt_standing(attempt, now)

    assert standing == Standing(conversation_wait=None, shared_wait=10 * 60 + 1)
    assert (standing.verified_mode, standing.longest_wait) == (True, 601)
    # One limit alone stands as well: the credential's, for another value.
    other = attempt_standing(Attempt.of(conversation, ["600111333"]), now)
    assert other == Standing(conversation_wait=None, shared_wait=5 * 60 + 1)


@fast
def test_a_row_read_beside_the_limits_is_read_with_them(company):
    """`Beside`: the row of its query, whether failures are found or not (a later column
    may be NULL); no row, None; read in either case."""
    conversation = conversation_of(company, "conv-beside")
    attempt = Attempt.of(conversation, ["600111222"])
    now = timezone.now()
    row = Beside("SELECT %s AS a, CAST(NULL AS INTEGER) AS b", [7])
    nothing = Beside("SELECT 1 AS a, 2 AS b WHERE 1 = %s", [0])

    attempt_standing(attempt, now, beside=row)
    attempt_standing(attempt, now, beside=nothing)
    assert (row.read, row.row) == (True, (7, None))
    assert (nothing.read, nothing.row) == (True, None)

    for minutes in (3, 2):
        failed_at(company, now - minutes * MINUTE, conversation_key="conv-beside")
    again = Beside("SELECT %s AS a, CAST(NULL AS INTEGER) AS b", [8])
    nothing_again = Beside("SELECT 1 AS a, 2 AS b WHERE 1 = %s", [0])

    assert attempt_standing(attempt, now, beside=again).conversation_wait is None
    attempt_standing(attempt, now, beside=nothing_again)
    assert (again.read, again.row) == (True, (8, None))
    assert (nothing_again.read, nothing_again.row) == (True, None)


@fast
def test_a_failure_is_recorded_field_by_field(company, ana, bruno):
    credential = with_credential(company)
    conversation = conversation_of(company, "conv-rec")
    attempt = Attempt.of(conversation, ["600999888"])

    failure_record(
        attempt,
        timezone.now(),
        kind=Kind.IDENTITY_SWITCH,
        contact=ana,
        claimed_contact=bruno,
        detail={"via": "phone"},
    )

    event = events(company).get(conversation_key="conv-rec")
    assert (event.company_id, event.kind, event.contact, event.claimed_contact) == (
        company.pk,
        Kind.IDENTITY_SWITCH,
        ana,
        bruno,
    )
    assert event.credential_id == credential.pk
    assert event.identifier_digest == identifier_digest(company_id=company.pk, value="600999888")
    assert event.detail == {"via": "phone"}
    assert not events(company).filter(kind=Kind.IDENTIFICATION_BURST).exists()


@fast
def test_a_failure_naming_no_value_is_recorded_with_no_digest(company):
    """An attempt without an identifier value (outside the tool API, no credential either)
    counts for its conversation only."""
    conversation = conversation_of(company, "conv-none")

    failure_record(
        Attempt(conversation, None, ()),
        timezone.now(),
        kind=Kind.IDENTIFICATION_FAILED,
        detail={},
    )

    event = events(company).get(conversation_key="conv-none")
    assert (event.identifier_digest, event.credential_id, event.contact) == ("", None, None)


@pytest.fixture
def shared_limit_reached(company):
    """The credential's limit (2 in 60 minutes) reached by other conversations meanwhile: its
    oldest failure leaves the window in 30 minutes."""
    credential = with_credential(company)
    company.identify_failures_per_credential = 2
    company.identify_credential_window_minutes = 60
    company.identify_failures_per_conversation = 3
    company.identify_conversation_window_minutes = 10
    now = timezone.now()
    for minutes in (30, 1):
        failed_at(company, now - minutes * MINUTE, credential=credential)
    return now


@fast
def test_a_failure_finding_a_limit_reached_meanwhile_is_refused_with_its_wait(
    company, shared_limit_reached
):
    now = shared_limit_reached
    conversation = conversation_of(company, "conv-late")
    before = events(company).count()

    with pytest.raises(TooManyAttempts) as refused:
        failure_record(
            Attempt.of(conversation, ["600111222"]), now, kind=Kind.IDENTITY_SWITCH, detail={}
        )

    assert (refused.value.code, refused.value.extras) == (
        "too_many_attempts",
        {"retry_after_seconds": 30 * 60 + 1},
    )
    assert events(company).count() == before  # not counted


@fast
def test_in_verified_mode_a_shared_limit_reached_meanwhile_is_answered_in_that_mode(
    company, shared_limit_reached
):
    now = shared_limit_reached
    conversation = conversation_of(company, "conv-late")
    before = events(company).count()

    with pytest.raises(VerifiedModeStands):
        failure_record(
            Attempt.of(conversation, ["600111222"]),
            now,
            kind=Kind.IDENTIFICATION_FAILED,
            detail={},
            verified_mode=True,
        )

    assert events(company).count() == before


@fast
def test_in_verified_mode_the_conversations_own_limit_still_refuses_with_its_own_wait(
    company, shared_limit_reached
):
    now = shared_limit_reached
    conversation = conversation_of(company, "conv-late")
    for minutes in (5, 4, 3):  # its own limit: 5 minutes left
        failed_at(company, now - minutes * MINUTE, conversation_key="conv-late")
    attempt = Attempt.of(conversation, ["600111222"])

    with pytest.raises(TooManyAttempts) as own:
        failure_record(attempt, now, kind=Kind.IDENTIFICATION_FAILED, detail={}, verified_mode=True)
    with pytest.raises(TooManyAttempts) as longest:
        failure_record(attempt, now, kind=Kind.IDENTIFICATION_FAILED, detail={})

    assert own.value.extras == {"retry_after_seconds": 5 * 60 + 1}
    assert longest.value.extras == {"retry_after_seconds": 30 * 60 + 1}


@fast
def test_a_burst_is_raised_once_per_credential_and_window_and_mailed(
    company, make_staff, django_capture_on_commit_callbacks
):
    """Another credential's burst, and this one's of an earlier window, hold nothing back; a
    burst of this window does."""
    make_staff("marta", role="admin", email="marta@example.com")
    other = gateway_credential_issue(company=company, name="second gateway")[0]
    credential = with_credential(company)
    company.identify_failures_per_credential = 2
    company.identify_credential_window_minutes = 60
    now = timezone.now()
    burst_at(company, other, now - 10 * MINUTE)
    burst_at(company, credential, now - 61 * MINUTE)
    failed_at(company, now - 5 * MINUTE, credential=credential)
    bursts = events(company).filter(kind=Kind.IDENTIFICATION_BURST, credential=credential)

    with django_capture_on_commit_callbacks(execute=True):
        failure_record(
            Attempt.of(conversation_of(company, "conv-2nd"), ["600111222"]),
            now,
            kind=Kind.IDENTIFICATION_FAILED,
            detail={},
        )

    burst = bursts.get(created_at__gt=now - MINUTE)
    assert (burst.company_id, burst.conversation_key, burst.credential_id) == (
        company.pk,
        "conv-2nd",
        credential.pk,
    )
    assert burst.detail == {"failures": 2, "window_minutes": 60}
    assert type(burst.detail["window_minutes"]) is int
    assert [m.bcc for m in mail.outbox] == [["marta@example.com"]]

    # Its failures leave the window, two more reach the limit again: the same burst.
    events(company).filter(kind=Kind.IDENTIFICATION_FAILED).update(created_at=now - 61 * MINUTE)
    for n in (3, 4):
        failure_record(
            Attempt.of(conversation_of(company, f"conv-{n}th"), [f"60011122{n}"]),
            now,
            kind=Kind.IDENTIFICATION_FAILED,
            detail={},
        )
    assert bursts.filter(created_at__gt=now - MINUTE).count() == 1


def held() -> set:
    """The advisory locks this connection holds (PostgreSQL)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT classid, objid FROM pg_locks "
            "WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        return set(cursor.fetchall())


@pytest.mark.postgres
@fast
def test_recording_a_failure_holds_its_credentials_lock_and_one_per_value(company):
    """Failures arriving at once are recorded in turn per credential and per identifier value
    (advisory locks held until the transaction ends)."""

    def record(conversation, values):
        before = held()
        failure_record(
            Attempt.of(conversation, values), now, kind=Kind.IDENTIFICATION_FAILED, detail={}
        )
        return held() - before

    with_credential(company)
    now = timezone.now()
    conversation = conversation_of(company, "conv-locks")

    assert len(record(conversation, ["600111222"])) == 2  # the credential's, the value's
    # Two values, one of them locked already, and the credential too: one more lock.
    assert len(record(conversation, ["600111222", "600111333"])) == 1
    company.gateway_credential_id = None
    assert len(record(conversation_of(company, "conv-nocred"), ["600111444", "600111555"])) == 2


@pytest.mark.postgres
@fast
def test_past_its_limit_a_tools_guess_is_refused_on_the_count_alone(ana_conv, monkeypatch):
    """An identified conversation naming other identifiers past its limit is refused before
    anything else: no failure recorded, no lock waited for (a flood of refused guesses does
    not queue behind the credential's recordings)."""
    company = ana_conv.company
    with_credential(company)
    now = timezone.now()
    for _ in range(company.identify_failures_per_conversation):
        failed_at(company, now - MINUTE, conversation_key=ana_conv.external_id)
    recorded = events(company).count()
    locks = held()
    monkeypatch.setattr(timezone, "now", lambda: now)

    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=ana_conv, identifier="otro@example.com")

    assert (refused.value.code, refused.value.extras) == (
        "too_many_attempts",
        {"retry_after_seconds": company.identify_conversation_window_minutes * 60 - 60 + 1},
    )
    assert events(company).count() == recorded
    assert held() == locks
