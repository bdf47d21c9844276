"""PgBouncer in transaction pooling mode (docs/scaling.md): consecutive transactions of one
client connection run on whichever server connection is free, so nothing of a session may be
relied on between transactions.

The concurrency tests of the idempotency engine and of booking run here again, unchanged, with
their gunicorn servers reaching the test database through a PgBouncer of their own (pool
mode transaction, GARANTE_PGBOUNCER=1: no prepared statements, no server-side cursors). And the
code is searched for what transaction pooling breaks: session SETs, session advisory locks,
LISTEN/NOTIFY, temporary tables, WITH HOLD cursors.
"""

import re
import shutil
import uuid
from pathlib import Path

import psycopg
import pytest

from deploy.pgbouncer import pgbouncer_configure
from deploy.processes import executable, free_port
from tests.agenda.booking_race import fifty_conversations_book_the_same_slot
from tests.script_support import stop_process
from tests.servers import database_url_of_current_connection
from tests.tooling.idempotency_races import (
    a_duplicate_past_the_bound,
    fifty_different_calls_at_once,
    fifty_identical_calls_at_once,
)

ROOT = Path(__file__).resolve().parent.parent.parent
POOL_SIZE = 6  # fewer server connections than the servers' threads: they queue in PgBouncer


@pytest.fixture(scope="module")
def pgbouncer(django_db_setup, django_db_blocker):
    """A PgBouncer in front of the test database; yields the URL that goes through it."""
    import subprocess
    import time

    try:
        executable("pgbouncer")
    except SystemExit:
        pytest.skip("pgbouncer is not installed")
    with django_db_blocker.unblock():
        direct = database_url_of_current_connection()
    port = free_port()
    # Not pytest's private temporary folder: PgBouncer may run as another user (postgres).
    directory = ROOT / "var" / f"pgbouncer-test-{uuid.uuid4().hex[:8]}"
    command = pgbouncer_configure(directory, direct, port, POOL_SIZE)
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    pooled = direct.rsplit("@", 1)[0] + f"@127.0.0.1:{port}/" + direct.rsplit("/", 1)[1]
    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(pooled, prepare_threshold=None).close()
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline and process.poll() is None, "PgBouncer did not start"
            time.sleep(0.1)
    yield pooled
    stop_process(process)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def gunicorn_server(gunicorn_server, pgbouncer):
    """tests.servers' gunicorn, reaching the test database only through PgBouncer."""

    def start(**options):
        options.setdefault("database_url", pgbouncer)
        options["env"] = {**options.get("env", {}), "GARANTE_PGBOUNCER": "1"}
        return gunicorn_server(**options)

    return start


# The concurrency tests of booking and of the idempotency engine, the same as in
# tests/agenda/test_concurrency.py and tests/tooling/test_idempotency_concurrency.py, with the
# `gunicorn_server` above.


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_conversations_booking_the_same_slot_make_exactly_one_appointment(
    gunicorn_server, company
):
    fifty_conversations_book_the_same_slot(gunicorn_server, company)


@pytest.mark.postgres
def test_fifty_identical_calls_at_once_have_one_effect_and_fifty_identical_answers(
    gunicorn_server, company, token
):
    fifty_identical_calls_at_once(gunicorn_server, company, token)


@pytest.mark.postgres
def test_fifty_different_calls_at_once_each_take_effect_once(gunicorn_server, company, token):
    fifty_different_calls_at_once(gunicorn_server, company, token)


@pytest.mark.postgres
def test_a_duplicate_that_waits_past_the_bound_is_told_to_retry_and_its_retry_replays(
    gunicorn_server, company, token, tmp_path
):
    a_duplicate_past_the_bound(gunicorn_server, company, token, tmp_path)


@pytest.mark.postgres
def test_through_pgbouncer_each_transaction_starts_from_the_server_defaults(pgbouncer):
    # What a pooled connection's transactions may rely on: the time zone Django sets on every
    # connection (UTC), whichever server connection serves them and whatever another client
    # set there (PgBouncer restores the parameters it tracks), and nothing a previous
    # transaction set with SET LOCAL.
    with psycopg.connect(pgbouncer, prepare_threshold=None, autocommit=True) as first:
        first.execute("SET TIME ZONE 'UTC'")  # as Django's backend does at connect
        with first.transaction():
            first.execute("SET LOCAL lock_timeout = '123ms'")
            assert first.execute("SHOW lock_timeout").fetchone() == ("123ms",)
        for _ in range(20):
            with psycopg.connect(pgbouncer, prepare_threshold=None, autocommit=True) as other:
                # A session setting of another client, left on its server connection.
                other.execute("SET TIME ZONE 'America/Lima'")
                with other.transaction():
                    other.execute("SELECT pg_sleep(0.01)")
            with first.transaction():
                assert first.execute("SHOW lock_timeout").fetchone() != ("123ms",)
                assert first.execute("SHOW TimeZone").fetchone() == ("UTC",)


# --- what transaction pooling breaks, searched in the code --------------------------------

APPS = ["core", "tooling", "agenda", "sales", "support", "integration", "config"]
SESSION_STATE = {
    # A SET outside SET LOCAL stays on the server connection, for the next client's
    # transactions; set_config(..., false) is the same.
    "a session SET": re.compile(
        r"""["'](?:\s*)SET\s+(?!LOCAL\b)(?!TRANSACTION\b)\w+\s*(?:=|TO)""", re.I
    ),
    "set_config for the session": re.compile(r"set_config\([^)]*,\s*false\s*\)", re.I),
    "a session advisory lock": re.compile(r"pg_(?:try_)?advisory_lock(?:_shared)?\s*\(", re.I),
    "LISTEN/NOTIFY": re.compile(r"""["']\s*(?:LISTEN|NOTIFY|UNLISTEN)\s"""),
    "a temporary table": re.compile(r"CREATE\s+(?:GLOBAL\s+|LOCAL\s+)?TEMP(?:ORARY)?\s", re.I),
    "a cursor WITH HOLD": re.compile(r"WITH\s+HOLD", re.I),
    "a named prepared statement": re.compile(r"""["']\s*PREPARE\s+\w+"""),
}


def test_no_code_relies_on_session_state_that_transaction_pooling_would_lose():
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            text = path.read_text()
            for what, pattern in SESSION_STATE.items():
                for match in pattern.finditer(text):
                    line = text.count("\n", 0, match.start()) + 1
                    found.append(f"{path.relative_to(ROOT)}:{line}: {what}: {match.group(0)!r}")
    assert found == []


def test_the_search_finds_each_kind_of_session_state():
    # SQL keywords are matched in capitals, as the code writes them (a Spanish "prepare una"
    # in a message is not a statement). Each pattern finds what it names: a search that
    # finds nothing proves nothing unless it could.
    samples = {
        "a session SET": 'cursor.execute("SET lock_timeout = 5")',
        "set_config for the session": "SELECT set_config('lock_timeout', '1s', false)",
        "a session advisory lock": "SELECT pg_advisory_lock(1, 2)",
        "LISTEN/NOTIFY": 'cursor.execute("LISTEN changes")',
        "a temporary table": "CREATE TEMP TABLE t (id int)",
        "a cursor WITH HOLD": "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
        "a named prepared statement": 'cursor.execute("PREPARE q AS SELECT 1")',
    }
    for what, sample in samples.items():
        assert SESSION_STATE[what].search(sample), what
    allowed = [
        'cursor.execute("SET LOCAL synchronous_commit TO OFF")',
        "SELECT set_config('lock_timeout', %s, true)",
        "SELECT pg_advisory_xact_lock(%s, %s)",
    ]
    for sample in allowed:
        assert not any(p.search(sample) for p in SESSION_STATE.values()), sample
