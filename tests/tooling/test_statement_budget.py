"""The SQL a first write sends (issue #11), and the guarantees the lean path must keep.

A first write with a fresh idempotency key is the most expensive call the Gateway makes; each
statement costs CPU in the ORM and a round trip. These tests bound the statements of the call's
own work, from the key lookup to the COMMIT of its transaction, so a lazy foreign-key load or a
duplicated SELECT that creeps back in fails the ceiling here. Authentication and the call's
trace are other code's budget and are left out.
"""

import threading

import pytest
from django.db import connection, connections, transaction

from core import references
from core.errors import Conflict
from core.idempotency import idempotent_execute
from core.identity import identify_contact, step_up_policies
from core.models import Company, Conversation, IdempotencyRecord
from core.services import contact_create
from support.models import Case
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, BRUNO_DOCUMENT
from tests.statements import Budget, call_statements, shape
from tooling.context import CallMeta, ToolContext

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def first_call(company: Company, tool: str, arguments: dict, conversation_id: str):
    """A write tool called with a fresh key: its outcome and the SQL of its own work."""
    return call_statements(company, tool, arguments, conversation_id=conversation_id)


@pytest.fixture
def gateway_company(company):
    """The company as authentication hands it to a call: nothing related loaded yet."""
    return Company.objects.get(pk=company.pk)


# Budgets count the statements besides BEGIN and COMMIT.
IDENTIFY = Budget(
    at_most=6,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",  # the claim, its lock wait bounded in-statement
        # First sight, inserted before any read: the row is this transaction's, not re-read.
        "INSERT core_conversation",
        "UPDATE core_conversation",
        "UPDATE core_idempotencyrecord",  # the answer, stored with the effect
        "COMMIT",
    ),
)


def test_a_first_identify_contact_of_a_new_conversation_stays_within_its_budget(
    gateway_company, ana
):
    outcome, statements = first_call(
        gateway_company, "identify_contact", {"document": ANA_DOCUMENT}, "conv-new"
    )

    assert outcome.is_error is False
    assert outcome.body["first_name"] == "Ana"
    shapes = [shape(sql) for sql in statements]
    IDENTIFY.check(shapes)
    assert shapes[0] == "SELECT core_idempotencyrecord"  # the key lookup, before any guard
    assert "SELECT core_conversation" not in shapes  # a new conversation is inserted at once
    # The contact is looked up in the statement that reads the limits (failures outlive a
    # rolled-back insert), the same whether it exists or not, and a row inserted by this
    # transaction is not locked again.
    (limits,) = [sql for sql in statements if '"core_securityevent"' in sql]
    assert '"core_contact"' in limits
    assert "SELECT core_contact" not in shapes
    assert "SELECT core_conversation FOR NO KEY UPDATE" not in shapes
    assert not any("core_company" in sql for sql in statements)
    assert Conversation.objects.get(external_id="conv-new").contact == ana


OPEN_CASE = {"identifier": ANA_DOCUMENT, "subject": "Grifo", "description": "Gotea desde ayer."}
OPEN_CASE_BUDGET = Budget(
    at_most=5,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        # A possible duplicate? The customer's intent (core.idempotency.intent) is locked by
        # the statement that reads the conversation and its customer, one call at a time ...
        "SELECT core_conversation + LOCK intent",
        # ... and the INSERT opens the case unless a recent open one stands (WHERE NOT
        # EXISTS, in a statement after the lock). A reference collision writes nothing and is
        # drawn again.
        "INSERT support_case",
        # The ledger written with the stored answer, in one statement (core.sql.execute_all).
        "INSERT tooling_exposedreference + UPDATE core_idempotencyrecord",  # the ledger
        "COMMIT",
    ),
)


def test_a_first_open_case_stays_within_its_budget_and_never_reads_the_company(
    gateway_company, ana, settings
):
    settings.GARANTE_PROCESS_CACHE_SECONDS = 5
    step_up_policies.forget()
    first_call(gateway_company, "identify_contact", {"document": ANA_DOCUMENT}, "conv-1")

    _, cold = first_call(gateway_company, "open_case", OPEN_CASE, "conv-1")
    Case.objects.filter(contact=ana).update(state=Case.State.RESOLVED)  # else a duplicate
    outcome, statements = first_call(gateway_company, "open_case", OPEN_CASE, "conv-1")

    assert outcome.is_error is False
    shapes, cold_shapes = [shape(sql) for sql in statements], [shape(sql) for sql in cold]
    OPEN_CASE_BUDGET.check(shapes)
    assert "LOCK intent" not in shapes and "SELECT support_case" not in shapes
    # The step-up policy is read by the process's first sensitive write of the company only.
    assert "SELECT core_stepuppolicy" in cold_shapes
    assert "SELECT core_stepuppolicy" not in shapes
    assert len(cold_shapes) == len(shapes) + 1
    assert not any("core_company" in sql for sql in cold + statements)
    assert Case.objects.get(reference=outcome.body["reference"]).contact == ana


REPLAY = Budget(at_most=1, includes=("SELECT core_idempotencyrecord",))


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("identify_contact", {"document": "12345678Z"}), ("open_case", OPEN_CASE)],
)
def test_a_replay_sends_only_the_key_lookup(gateway_company, ana, tool, arguments):
    first_call(gateway_company, "identify_contact", {"document": "12345678Z"}, "conv-1")
    first, _ = call_statements(
        gateway_company, tool, arguments, conversation_id="conv-1", key="k-replay"
    )

    again, statements = call_statements(
        gateway_company, tool, arguments, conversation_id="conv-1", key="k-replay"
    )

    assert first.is_error is False, first.body
    assert again.body == first.body
    # The replay's count is bookkeeping written off the request path (core.deferred), which
    # the tests write at once.
    counted = [sql for sql in statements if '"replay_count"' not in sql]
    assert len(counted) == len(statements) - 1
    REPLAY.check([shape(sql) for sql in counted])


# The guarantees the lean claim must keep -----------------------------------------------------


def test_identifying_again_in_a_known_conversation_locks_it_and_reads_it_again(
    gateway_company, ana
):
    first_call(gateway_company, "identify_contact", {"document": ANA_DOCUMENT}, "conv-1")

    outcome, statements = first_call(
        gateway_company, "identify_contact", {"email": ANA_EMAIL}, "conv-1"
    )

    assert outcome.is_error is False, outcome.body
    shapes = [shape(sql) for sql in statements]
    assert "SELECT core_conversation FOR NO KEY UPDATE" in shapes  # identifications in turn
    # Its own customer again: no guess, so neither the limits nor the contacts are read.
    assert "SELECT core_securityevent" not in shapes
    assert "SELECT core_contact" not in shapes


def test_a_conversation_is_new_only_to_the_transaction_that_inserted_it(company):
    def context(conversation_id: str) -> ToolContext:
        return ToolContext(company=company, meta=CallMeta(conversation_id=conversation_id))

    with transaction.atomic():
        assert context("conv-a").conversation_is_new is True
        assert context("conv-a").conversation_is_new is False  # a later call reads it
    assert context("conv-b").conversation_is_new is False  # committed at once: others see it


def test_concurrent_identifications_of_a_new_conversation_are_taken_in_turn(
    gateway_company, ana, company
):
    bruno = contact_create(company=company, first_name="Bruno", document_number=BRUNO_DOCUMENT)
    inserted, release = threading.Event(), threading.Event()

    def twin():  # identifies Ana in a new conversation and holds its transaction open
        with transaction.atomic():
            ctx = ToolContext(company=company, meta=CallMeta(conversation_id="conv-race"))
            identify_contact(
                conversation=ctx.conversation_held(), kind="document", value=ANA_DOCUMENT, held=True
            )
            inserted.set()
            release.wait(10)

    thread = _in_thread(twin)
    assert inserted.wait(10)
    threading.Timer(0.3, release.set).start()  # our insert waits on the twin's until then

    outcome, _ = first_call(
        gateway_company, "identify_contact", {"document": BRUNO_DOCUMENT}, "conv-race"
    )
    thread.join(10)

    assert outcome.is_error is True
    assert outcome.body["code"] == "identity_switch"
    assert Conversation.objects.get(external_id="conv-race").contact == ana
    assert bruno.conversations.count() == 0


def test_a_case_reference_collision_is_drawn_again_within_the_call(
    gateway_company, ana, monkeypatch
):
    first_call(gateway_company, "identify_contact", {"document": ANA_DOCUMENT}, "conv-1")
    taken, _ = first_call(gateway_company, "open_case", OPEN_CASE, "conv-1")
    draws = iter([taken.body["reference"], "CS-NEW234"])
    monkeypatch.setattr(references, "new_reference", lambda prefix: next(draws))

    another = {**OPEN_CASE, "new_case": True}  # not a possible duplicate: another problem
    outcome, statements = first_call(gateway_company, "open_case", another, "conv-1")

    assert outcome.is_error is False, outcome.body
    assert outcome.body["reference"] == "CS-NEW234"
    shapes = [shape(sql) for sql in statements]
    assert shapes.count("INSERT support_case") == 2  # the taken reference wrote nothing
    assert "SAVEPOINT" not in shapes and shapes[-1] == "COMMIT"
    assert Case.objects.filter(contact=ana).count() == 2


def _in_thread(target) -> threading.Thread:
    def run() -> None:
        try:
            target()
        finally:
            connections.close_all()  # the test database cannot be dropped with them open

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _current_lock_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW lock_timeout")
        return cursor.fetchone()[0]


def test_the_wait_for_a_twin_is_bounded_and_its_answer_replayed_after(company, settings):
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    running, release = threading.Event(), threading.Event()

    def slow_effect():
        running.set()
        assert release.wait(10)
        return {"done": 1}, 200

    twin = _in_thread(
        lambda: idempotent_execute(
            company=company, key="k-1", operation="op", request={}, effect=slow_effect
        )
    )
    assert running.wait(10)

    with pytest.raises(Conflict) as waited:
        idempotent_execute(
            company=company, key="k-1", operation="op", request={}, effect=lambda: ({}, 200)
        )
    release.set()
    twin.join(10)

    assert waited.value.code == "request_in_progress"
    replayed = idempotent_execute(
        company=company, key="k-1", operation="op", request={}, effect=lambda: ({}, 200)
    )
    assert (replayed.replayed, replayed.body) == (True, {"done": 1})
    assert IdempotencyRecord.objects.filter(company=company).count() == 1


def test_the_effects_own_lock_waits_are_not_bounded_by_the_claim(company, settings):
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    outside = _current_lock_timeout()
    locked, release = threading.Event(), threading.Event()

    def hold_company_row():
        with transaction.atomic():
            Company.objects.select_for_update().get(pk=company.pk)
            locked.set()
            release.wait(10)

    holder = _in_thread(hold_company_row)
    assert locked.wait(10)
    threading.Timer(0.6, release.set).start()  # three times the claim's bound

    def effect():
        timeout_seen = _current_lock_timeout()
        Company.objects.select_for_update().get(pk=company.pk)  # waits ~0.6 s, then proceeds
        return {"lock_timeout": timeout_seen}, 200

    result = idempotent_execute(
        company=company, key="k-2", operation="op", request={}, effect=effect
    )
    holder.join(10)

    assert result.body == {"lock_timeout": outside}
    assert result.replayed is False


@pytest.mark.parametrize("twin_commits", [True, False])
def test_a_conversation_created_concurrently_is_one_conversation(company, twin_commits):
    inserted, release = threading.Event(), threading.Event()
    twins: list[int] = []

    def twin():
        with transaction.atomic():
            twins.append(Conversation.objects.create(company=company, external_id="conv-race").pk)
            inserted.set()
            release.wait(10)
            if not twin_commits:
                transaction.set_rollback(True)

    thread = _in_thread(twin)
    assert inserted.wait(10)
    threading.Timer(0.3, release.set).start()  # our insert waits on the twin's until then

    conversation = ToolContext(company=company, meta=CallMeta(conversation_id="conv-race"))
    ours = conversation.conversation
    thread.join(10)

    stored = Conversation.objects.get(company=company, external_id="conv-race")
    assert ours.pk == stored.pk
    assert (ours.pk == twins[0]) is twin_commits
    assert ours.company == company
