"""Dependencies going down under a real server: PostgreSQL stopped in the middle of a load or
frozen (alive, answering nothing), Redis (the Celery broker) stopped or frozen under code
requests, and the server's own workers killed in the middle of a write. Our own cluster and
redis-server (see conftest.py): the shared services on 5432 and 6379 are never touched."""

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
from django.conf import settings

from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT
from tests.reliability.conftest import Answer, OutageStack, assert_clean_wire, unique
from tests.servers import wait_for

# django_db: the session then creates the test database, whose schema the stack copies.
pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db]

# The sandbox's customers (core/management/commands/seed_sandbox.py).
CLIENTS = 4
PROMPT_SECONDS = 5  # an outage is answered within this, not after a hang
# A database that answers nothing is given this long per exchange (config.settings' default).
# A broker that answers nothing: a publish and its one retry, each a few exchanges with Redis
# bounded by config.settings (6 s measured with the default 2 s; before, it waited for ever).
BROKER_PROMPT_SECONDS = 5 * settings.GARANTE_BROKER_ANSWER_SECONDS
DEADLINE_SECONDS = settings.GARANTE_DB_ANSWER_SECONDS
RECOVERY_SECONDS = 20


def identified_conversation(stack: OutageStack, document: str) -> str:
    conversation = unique("conv")
    gateway = stack.gateway()
    answer = gateway.call(
        "identify_contact", {"document": document}, conversation=conversation, key=unique("id")
    )
    gateway.close()
    assert answer.status == 200 and answer.result["isError"] is False, answer.text
    return conversation


def is_success(answer: Answer) -> bool:
    return answer.status == 200 and answer.result["isError"] is False


def test_postgres_stopped_mid_load_answers_system_and_recovers_without_losing_a_write(
    outage_stack: OutageStack,
):
    stack = outage_stack
    subject = unique("outage")
    case = {
        "identifier": ANA_DOCUMENT,
        "subject": subject,
        "description": "La caldera no enciende.",
        "new_case": True,  # every call a case of its own (docs/tools.md, above the key)
    }
    conversations = [identified_conversation(stack, ANA_DOCUMENT) for _ in range(CLIENTS)]
    gateway = stack.gateway(timeout=30)
    calls: list[tuple[str, str | None, Answer]] = []  # (tool, key, answer)
    lock = threading.Lock()
    stop = threading.Event()

    def client(conversation: str) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            if n % 2:
                key = f"{conversation}-w{n}"
                answer = gateway.call("open_case", case, conversation=conversation, key=key)
                record = ("open_case", key, answer)
            else:
                answer = gateway.call("list_services", {}, conversation=conversation)
                record = ("list_services", None, answer)
            with lock:
                calls.append(record)

    threads = [threading.Thread(target=client, args=(c,)) for c in conversations]
    for thread in threads:
        thread.start()

    def answered(tool: str, since: float, success: bool | None = None) -> int:
        """How many calls of `tool` sent after `since` have been answered (successes only,
        or failures only, when `success` says so)."""
        with lock:
            return sum(
                1
                for name, _, answer in calls
                if name == tool
                and answer.sent_at > since
                and (success is None or is_success(answer) == success)
            )

    try:
        # The load is running: every client has had writes answered before the outage.
        started = time.monotonic()
        wait_for(lambda: answered("open_case", started, success=True) >= 2 * CLIENTS, 30, 0.05)
        stack.postgres.stop("immediate")
        down_from = time.monotonic()
        # The outage lasts until every client has had writes answered while it went on.
        wait_for(lambda: answered("open_case", down_from) >= 2 * CLIENTS, 30, 0.05)
        down_until = time.monotonic()
        stack.postgres.start()
        back_at = time.monotonic()
        # Let the load run until the server has answered successes again by itself.
        deadline = back_at + RECOVERY_SECONDS
        while time.monotonic() < deadline:
            with lock:
                recent = [a for _, _, a in calls if a.sent_at > back_at]
            if sum(1 for a in recent if is_success(a)) >= 2 * CLIENTS:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)

    # Every answer, in every phase: JSON on the wire, a success or SYSTEM, promptly.
    for tool, _key, answer in calls:
        assert answer.status == 200, (tool, answer.status, answer.text[:300])
        assert answer.headers["content-type"].startswith("application/json")
        assert_clean_wire(answer.text)
        assert is_success(answer) or answer.error_type == "SYSTEM", (tool, answer.text[:300])
        assert answer.seconds < PROMPT_SECONDS, (tool, answer.seconds)
    during = [(t, a) for t, _, a in calls if a.sent_at > down_from and a.answered_at < down_until]
    assert sum(1 for t, _ in during if t == "open_case") >= CLIENTS, "no outage exercised"
    # Every call that needs the database answers SYSTEM with a message. The catalogue may
    # still come from a worker's process cache (core.process_cache): then it is the very
    # catalogue answered before the outage, never anything else.
    catalogue = next(a.body for t, _, a in calls if t == "list_services" and is_success(a))
    for tool, answer in during:
        if is_success(answer):
            assert tool == "list_services" and answer.body == catalogue, answer.text[:300]
        else:
            assert answer.error_type == "SYSTEM" and answer.body.get("user_message")
    after = [a for _, _, a in calls if a.sent_at > back_at]
    assert any(is_success(a) for a in after), "the server did not recover by itself"
    assert all(is_success(a) for a in after[-CLIENTS:]), "still failing after recovery"

    # No committed write lost or duplicated: every key, retried after the outage, ends in
    # exactly one case; keys that had succeeded replay the very same case.
    writes = [(key, answer) for tool, key, answer in calls if tool == "open_case"]
    first_answers = {key: answer for key, answer in writes}
    final: dict[str, str] = {}
    for key, answer in first_answers.items():
        conversation = key.rsplit("-w", 1)[0]
        retried = gateway.call("open_case", case, conversation=conversation, key=key)
        assert is_success(retried), retried.text[:300]
        final[key] = retried.body["reference"]
        if is_success(answer):
            assert retried.text == answer.text or retried.body == answer.body
            assert retried.body["reference"] == answer.body["reference"]
    gateway.close()
    stored = stack.postgres.psql(
        f"SELECT reference FROM support_case WHERE subject = '{subject}' ORDER BY reference"
    ).split()
    assert sorted(stored) == sorted(final.values())  # one case per key, none extra
    assert len(set(final.values())) == len(final)
    assert Counter(a.error_type for _, _, a in calls)["SYSTEM"] >= sum(
        1 for _, a in during if not is_success(a)
    )


def test_redis_stopped_code_requests_answer_system_lose_nothing_and_work_once_it_is_back(
    outage_stack: OutageStack,
):
    stack = outage_stack
    conversation = identified_conversation(stack, BRUNO_DOCUMENT)
    gateway = stack.gateway()
    arguments = {"identifier": BRUNO_DOCUMENT, "channel": "sms"}
    key = unique("code")
    case = {
        "identifier": BRUNO_DOCUMENT,
        "subject": "Sin cobertura",
        "description": "Desde ayer.",
        "new_case": True,  # every call a case of its own (docs/tools.md, above the key)
    }
    stack.redis.stop()
    try:
        down = gateway.call(
            "request_verification_code", arguments, conversation=conversation, key=key
        )
        # Calls that do not need the broker go on meanwhile; a new case's staff email, whose
        # task cannot be queued, waits on the case for the sweep instead of being lost.
        listed = gateway.call("list_services", {}, conversation=conversation)
        opened = gateway.call("open_case", case, conversation=conversation, key=unique("case"))
    finally:
        stack.redis.start()

    assert down.status == 200 and down.error_type == "SYSTEM", down.text
    assert down.body["code"] == "delivery_unavailable"
    assert down.seconds < PROMPT_SECONDS
    assert_clean_wire(down.text)
    assert is_success(listed)
    assert is_success(opened), opened.text
    reference = opened.body["reference"]
    unsent = stack.postgres.psql(
        f"SELECT staff_notified_at IS NULL FROM support_case WHERE reference = '{reference}'"
    )
    assert unsent == "t"  # what case_staff_notices_pending hands the sweep
    # Nothing left half-done: the code that could not be queued is void, not waiting to be
    # delivered by a late worker, and nothing reached the (restarted) queue.
    states = stack.postgres.psql(
        "SELECT v.status || '/' || v.delivery_status FROM core_verificationchallenge v "
        "JOIN core_contact c ON c.id = v.contact_id "
        f"WHERE c.document_number = '{BRUNO_DOCUMENT}' ORDER BY v.id"
    ).split()
    assert states == ["revoked/not_sent"]

    # Back up: the same request (same key: a failure is never stored) now goes through.
    again = gateway.call("request_verification_code", arguments, conversation=conversation, key=key)
    gateway.close()
    assert is_success(again), again.text
    assert again.body["sent"] is True
    states = stack.postgres.psql(
        "SELECT v.status || '/' || v.delivery_status FROM core_verificationchallenge v "
        "JOIN core_contact c ON c.id = v.contact_id "
        f"WHERE c.document_number = '{BRUNO_DOCUMENT}' ORDER BY v.id"
    ).split()
    assert states == ["revoked/not_sent", "active/queued"]
    assert stack.redis.command("LLEN", "celery") == "1"  # the delivery task is queued


def test_postgres_frozen_answers_system_within_the_deadline_and_recovers_without_losing_a_write(
    outage_stack: OutageStack,
):
    """PostgreSQL alive but answering nothing (its processes stopped: a frozen host, hung
    storage; to the server, a network partition looks the same): every call still gets its
    answer, SYSTEM, within the database deadline instead of hanging, and once PostgreSQL
    thaws the server serves again by itself, the write the freeze caught retried once."""
    stack = outage_stack
    conversation = identified_conversation(stack, ANA_DOCUMENT)
    subject = unique("frozen")
    case = {
        "identifier": ANA_DOCUMENT,
        "subject": subject,
        "description": "No hay agua caliente.",
        "new_case": True,  # every call a case of its own (docs/tools.md, above the key)
    }
    key = unique("case")
    gateway = stack.gateway(timeout=60)
    calls = [
        ("open_case", case, key),
        ("identify_contact", {"document": ANA_DOCUMENT}, unique("id")),
        ("list_services", {}, None),
    ]
    answers: dict[str, Answer] = {}

    def call(tool: str, arguments: dict, call_key: str | None) -> None:
        answers[tool] = gateway.call(tool, arguments, conversation=conversation, key=call_key)

    frozen = _postgres_processes(stack)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=call, args=c) for c in calls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)

    for tool, _, _ in calls:
        answer = answers[tool]
        assert answer.status == 200, (tool, answer.text[:300])
        assert_clean_wire(answer.text)
        assert answer.seconds < DEADLINE_SECONDS + PROMPT_SECONDS, (tool, answer.seconds)
        if tool != "list_services" or not is_success(answer):  # it may come from the cache
            assert answer.error_type == "SYSTEM" and answer.body["user_message"], answer.text
    # Thawed: the server recovers by itself, and the write the freeze caught runs once.
    recovered = wait_for(
        lambda: _succeeded(gateway.call("open_case", case, conversation=conversation, key=key)),
        timeout=RECOVERY_SECONDS,
    )
    again = gateway.call("open_case", case, conversation=conversation, key=key)
    gateway.close()
    assert again.text == recovered.text
    stored = stack.postgres.psql(f"SELECT reference FROM support_case WHERE subject = '{subject}'")
    assert stored.split() == [recovered.body["reference"]]


def test_redis_frozen_code_requests_answer_system_promptly_and_work_once_it_thaws(
    outage_stack: OutageStack,
):
    """The broker alive but answering nothing (stopped with SIGSTOP; a failover or a lost
    route looks the same): a code request still answers SYSTEM promptly instead of waiting on
    the publish for ever, a case opened meanwhile is saved for the staff sweep, and once Redis
    thaws the same request goes through."""
    stack = outage_stack
    conversation = identified_conversation(stack, ANA_DOCUMENT)
    gateway = stack.gateway(timeout=60)
    arguments = {"identifier": ANA_DOCUMENT, "channel": "email"}
    key = unique("code")
    case = {
        "identifier": ANA_DOCUMENT,
        "subject": unique("frozen-broker"),
        "description": "Sin luz.",
        "new_case": True,  # the stack's earlier tests left Ana's cases open
    }
    redis = stack.redis.process
    assert redis is not None
    redis.send_signal(signal.SIGSTOP)
    try:
        down = gateway.call(
            "request_verification_code", arguments, conversation=conversation, key=key
        )
        opened = gateway.call("open_case", case, conversation=conversation, key=unique("case"))
    finally:
        redis.send_signal(signal.SIGCONT)

    assert down.status == 200 and down.error_type == "SYSTEM", down.text
    assert down.body["code"] == "delivery_unavailable"
    assert down.seconds < BROKER_PROMPT_SECONDS
    assert_clean_wire(down.text)
    assert is_success(opened), opened.text
    assert opened.seconds < BROKER_PROMPT_SECONDS
    again = gateway.call("request_verification_code", arguments, conversation=conversation, key=key)
    gateway.close()
    assert is_success(again), again.text
    # Nothing half-done: the code that could not be queued is void (a publish that reached
    # the frozen server and runs when it thaws delivers nothing), the new one is queued.
    states = stack.postgres.psql(
        "SELECT v.status || '/' || v.delivery_status FROM core_verificationchallenge v "
        "JOIN core_conversation c ON c.id = v.conversation_id "
        f"WHERE c.external_id = '{conversation}' ORDER BY v.id"
    ).split()
    assert states == ["revoked/not_sent", "active/queued"]


def _succeeded(answer: Answer) -> Answer | None:
    return answer if is_success(answer) else None


def _postgres_processes(stack: OutageStack) -> list[int]:
    """The private cluster's postmaster and every process it started."""
    postmaster = int((stack.postgres.data / "postmaster.pid").read_text().split()[0])
    return [postmaster, *_children(postmaster)]


def test_workers_killed_in_the_middle_of_a_write_leave_nothing_half_done_and_the_retry_runs_once(
    outage_stack: OutageStack,
):
    """An OOM kill or a hard deploy: the server's workers die while a write waits inside its
    transaction. Nothing of it stays, the key is not left claimed, and the Gateway's retry with
    the same key runs it once (a retry that meets the dead write's claim still held is told
    to come back, never run twice)."""
    stack = outage_stack
    conversation = identified_conversation(stack, ANA_DOCUMENT)
    subject = unique("killed")
    case = {
        "identifier": ANA_DOCUMENT,
        "subject": subject,
        "description": "Se apagó el termo.",
        "new_case": True,  # every call a case of its own (docs/tools.md, above the key)
    }
    key = unique("case")
    gateway = stack.gateway(timeout=30)
    # Our own session holds the cases' table, so the write stops at its INSERT, mid-transaction
    # (the key already claimed), for as long as we like.
    holder = psycopg.connect(stack.postgres.url("garante"), autocommit=False)
    holder.execute("LOCK TABLE support_case IN SHARE MODE")
    in_flight: list[object] = []
    first = threading.Thread(
        target=lambda: in_flight.append(_attempt(gateway, case, conversation, key))
    )
    first.start()
    try:
        wait_for(lambda: _waiting_inserts(stack) == 1, timeout=RECOVERY_SECONDS)
        killed = _kill_workers(stack)
        first.join(timeout=RECOVERY_SECONDS)
        wait_for(lambda: _workers(stack) and set(_workers(stack)).isdisjoint(killed))
        # The dead worker's database session still waits on our lock, holding its claim.
        meanwhile = gateway.call("open_case", case, conversation=conversation, key=key)
    finally:
        holder.rollback()  # the dead session's INSERT goes on, finds no client, rolls back
        holder.close()

    assert isinstance(in_flight[0], httpx.TransportError), in_flight  # no answer reached us
    assert meanwhile.status == 200 and meanwhile.error_type == "CONFLICT", meanwhile.text
    assert meanwhile.body["code"] == "request_in_progress"
    retried = wait_for(
        lambda: _settled(gateway.call("open_case", case, conversation=conversation, key=key))
    )
    again = gateway.call("open_case", case, conversation=conversation, key=key)
    gateway.close()

    assert is_success(retried), retried.text
    assert again.text == retried.text  # the stored answer, replayed
    stored = stack.postgres.psql(f"SELECT reference FROM support_case WHERE subject = '{subject}'")
    assert stored.split() == [retried.body["reference"]]  # one case, the retry's


def _attempt(gateway, case: dict, conversation: str, key: str) -> object:
    try:
        return gateway.call("open_case", case, conversation=conversation, key=key)
    except httpx.TransportError as exc:
        return exc


def _settled(answer: Answer) -> Answer | None:
    """An answer, unless it is the dead write's claim still being let go (come back later)."""
    in_progress = answer.error_type == "CONFLICT" and answer.body["code"] == "request_in_progress"
    return None if in_progress else answer


def _waiting_inserts(stack: OutageStack) -> int:
    return int(
        stack.postgres.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE 'INSERT INTO \"support_case\"%'"
        )
    )


def _workers(stack: OutageStack) -> list[int]:
    """The gunicorn master's worker processes."""
    return _children(stack.server.process.pid)


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _kill_workers(stack: OutageStack) -> list[int]:
    workers = _workers(stack)
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    return workers
