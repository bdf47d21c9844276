"""The PostgreSQL backend (core/postgresql): kept connections checked by Django's own health
check, and its answer deadline: in the web server's processes, a server that does not answer
(busy, frozen) fails the call within seconds instead of holding it. And its options
(config/settings.py): parameters bound by the server, hot statements prepared."""

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.backends.postgresql import base as django_postgresql

from core.durable import durably
from core.models import Company
from core.postgresql.base import (
    answers_within,
    bound_this_process,
    call_within,
    current_deadline,
)
from tests.servers import ROOT, database_url_of_current_connection, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT_SECONDS = 10  # an upper bound for the server's farewell to arrive, not a measurement


@pytest.fixture
def kept():
    """A connection of its own, kept between requests with health checks on."""
    connection = connections.create_connection(DEFAULT_DB_ALIAS)
    connection.settings_dict["CONN_HEALTH_CHECKS"] = True
    connection.settings_dict["CONN_MAX_AGE"] = 60
    connection.ensure_connection()
    yield connection
    connection.close()


def backend_pid(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def next_request(connection) -> None:
    """What Django does to a kept connection between two requests."""
    connection.close_if_unusable_or_obsolete()


def test_a_healthy_idle_connection_is_checked_without_a_round_trip(kept, monkeypatch):
    pid = backend_pid(kept)
    next_request(kept)

    def round_trip(self):
        raise AssertionError("SELECT 1 sent to a healthy idle connection")

    monkeypatch.setattr(django_postgresql.DatabaseWrapper, "is_usable", round_trip)
    assert kept.is_usable() is True

    monkeypatch.undo()
    assert backend_pid(kept) == pid  # the same connection, still working


def test_a_connection_the_server_closed_is_replaced_before_the_next_query(kept):
    pid = backend_pid(kept)
    next_request(kept)
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + WAIT_SECONDS
    while not _readable(kept) and time.monotonic() < deadline:
        time.sleep(0.01)

    # The first query of the request runs on a new connection instead of failing.
    assert backend_pid(kept) != pid


def _readable(connection) -> bool:
    poller = select.poll()
    poller.register(connection.connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def test_a_statement_run_again_and_again_is_prepared_on_its_connection(settings):
    """Parameters are bound by the server, so a statement is the same text whatever its
    values, and after a few runs on a connection it is parsed and planned once, there."""
    threshold = settings.DATABASES[DEFAULT_DB_ALIAS]["OPTIONS"]["prepare_threshold"]
    if threshold is None:
        pytest.skip("preparing is turned off (GARANTE_PG_PREPARE_THRESHOLD is empty)")
    connection = connections[DEFAULT_DB_ALIAS]
    statement = "SELECT count(*) FROM core_company WHERE id = %s AND name <> %s"

    with connection.cursor() as cursor:
        for value in range(threshold + 1):
            cursor.execute(statement, [value, f"garante-{value}"])
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%core_company WHERE id = $1 AND name <> $2%"],
        )
        prepared = cursor.fetchall()

    assert len(prepared) == 1


def test_the_options_of_the_database_url_are_kept_beside_the_backends_own():
    """`?sslmode=...&application_name=...` in DATABASE_URL reach the connection: the settings
    once replaced the URL's options with the backend's, so a production database asking for
    TLS got a connection without it."""
    url = database_url_of_current_connection()
    code = (
        "import django; django.setup();"
        "from django.db import connection; c = connection.cursor();"
        "c.execute('SHOW application_name'); print(c.fetchone()[0]);"
        "print(sorted(connection.settings_dict['OPTIONS']))"
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"{url}?sslmode=disable&application_name=garante-options-test",
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    name, options = done.stdout.splitlines()
    assert name == "garante-options-test"
    assert options == str(
        ["application_name", "prepare_threshold", "server_side_binding", "sslmode"]
    )


# --- the answer deadline of web requests ----------------------------------------------------


@pytest.fixture
def table_held():
    """Another session holding core_company exclusively: statements on it wait, as they would
    on a server that stopped answering. `release()` lets them go (after WAIT_SECONDS anyway,
    so a wait that nothing bounds fails the test instead of hanging it)."""
    holder = psycopg.connect(database_url_of_current_connection(), autocommit=False)
    holder.execute("LOCK TABLE core_company IN ACCESS EXCLUSIVE MODE")
    lock = threading.Lock()

    def release() -> None:
        with lock:
            if not holder.closed:
                holder.rollback()
                holder.close()

    threading.Timer(WAIT_SECONDS, release).start()
    yield release
    release()


def test_within_a_deadline_an_unanswered_statement_fails_and_its_connection_goes(kept, table_held):
    pid = backend_pid(kept)
    started = time.monotonic()
    refused = pytest.raises(OperationalError, match="did not answer within 1 s")
    with answers_within(1), refused, kept.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM core_company")
    waited = time.monotonic() - started
    table_held()

    assert 1 <= waited < 1 + WAIT_SECONDS
    assert kept.connection.closed  # its state unknown: never reused
    next_request(kept)
    assert backend_pid(kept) != pid  # the next request connects again
    assert wait_for(lambda: not backend_alive(pid), timeout=WAIT_SECONDS)  # the server let go


@contextlib.contextmanager
def frozen(pid: int):
    """The server process of a connection stopped (SIGSTOP): alive, its socket open and
    acknowledged by the kernel, answering nothing, as a frozen host or hung storage looks.
    On leaving it is continued and ended; after WAIT_SECONDS anyway, so that a wait nothing
    bounds fails the test instead of hanging it."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except (PermissionError, ProcessLookupError):
        pytest.skip("cannot stop a PostgreSQL server process from here")
    thaw = threading.Timer(WAIT_SECONDS, os.kill, [pid, signal.SIGCONT])
    thaw.start()
    try:
        yield
    finally:
        thaw.cancel()
        os.kill(pid, signal.SIGCONT)
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def _statement(kept) -> None:
    with kept.cursor() as cursor:
        cursor.execute("SELECT 1")


def _commit(kept) -> None:
    kept.commit()


def _fetch(kept) -> None:
    kept.cursor_for_test.fetchmany(5)


@pytest.fixture
def in_transaction(kept):
    """`kept` inside a transaction, with a server-side cursor (`.iterator()`'s) open on it."""
    kept.set_autocommit(False)
    cursor = kept.chunked_cursor()
    cursor.execute("SELECT generate_series(1, 10000)")
    cursor.fetchmany(5)
    kept.cursor_for_test = cursor
    yield kept


@pytest.mark.parametrize(
    "exchange",
    [
        pytest.param(_statement, id="a statement"),
        pytest.param(_commit, id="a commit"),
        pytest.param(_fetch, id="a server-side cursor's fetch"),
    ],
)
def test_within_a_deadline_a_frozen_server_is_given_up_and_its_connection_goes(
    in_transaction, exchange
):
    """Neither TCP (the server's kernel still acknowledges) nor the server's own timeouts (it
    runs none while stopped) end this wait: the client's watch does, within the bound."""
    kept = in_transaction
    pid = backend_pid(kept)
    with frozen(pid):
        started = time.monotonic()
        refused = pytest.raises(OperationalError, match="did not answer within 1 s")
        with answers_within(1), refused:
            exchange(kept)
        waited = time.monotonic() - started

        assert 1 <= waited < 1 + WAIT_SECONDS / 4
        assert kept.connection.closed  # its state unknown: never reused


def test_a_calls_exchanges_share_one_deadline_however_many_they_are(kept, bounded_process):
    """Each exchange is bounded (4 s in this process), and the call besides: three waits of
    0.4 s fit its 1 s only twice, so the third fails when the call's second is up, not after
    three more bounds (lock waits are waits for the server's answer like any other)."""
    started = time.monotonic()
    with call_within(1), kept.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.4)")
        cursor.execute("SELECT pg_sleep(0.4)")
        with pytest.raises(OperationalError, match="did not answer within"):
            cursor.execute("SELECT pg_sleep(0.4)")
    waited = time.monotonic() - started

    assert 1 <= waited < 1 + WAIT_SECONDS / 4
    assert kept.connection.closed


def test_time_queued_before_the_call_counts_towards_its_deadline(kept, bounded_process):
    arrived = time.monotonic() - 5  # waited 5 s for a thread, with a deadline of 2

    refused = pytest.raises(OperationalError, match=r"did not answer within|too little to connect")
    with call_within(2, started=arrived), kept.cursor() as cursor, refused:
        cursor.execute("SELECT 1")


def test_a_call_left_too_little_time_to_connect_fails_without_trying(bounded_process):
    """libpq waits 2 s at least for a server that accepts and never answers: a call that
    queued past its deadline, or nearly, fails at once instead of that long past it."""
    connection = connections.create_connection(DEFAULT_DB_ALIAS)
    started = time.monotonic()
    refused = pytest.raises(OperationalError, match="too little to connect")
    with call_within(1.5), refused:
        connection.ensure_connection()

    assert time.monotonic() - started < 1
    assert connection.connection is None
    with call_within(3):
        connection.ensure_connection()  # enough left: connects
    connection.close()


def test_outside_a_bounded_process_a_call_has_no_deadline(kept):
    with call_within(0.1), kept.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.3)")  # tests and commands: never cut short

    assert current_deadline() is None


def backend_alive(pid: int) -> bool:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0] == 1


def test_without_a_deadline_a_statement_waits_as_long_as_the_server_takes(kept, table_held):
    started = time.monotonic()  # before the timer starts, or its 1.5 s are partly unmeasured
    threading.Timer(1.5, table_held).start()

    with kept.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM core_company")
        answered = cursor.fetchone()[0]

    assert answered == Company.objects.count()  # the whole answer (asked again, unheld)

    assert time.monotonic() - started >= 1.5  # a migration or a purge is never cut short


def test_within_a_deadline_connecting_to_a_server_that_never_answers_fails():
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never speaks
    connection = connections.create_connection(DEFAULT_DB_ALIAS)
    connection.settings_dict = {**connection.settings_dict, "PORT": silent.getsockname()[1]}
    started = time.monotonic()
    try:
        with answers_within(2), pytest.raises(OperationalError):
            connection.ensure_connection()
    finally:
        silent.close()
    assert time.monotonic() - started < 2 + WAIT_SECONDS


@pytest.fixture
def bounded_process():
    bound_this_process(4)
    yield
    bound_this_process(None)


def test_a_bounded_process_bounds_every_thread_unless_a_block_says_otherwise(bounded_process):
    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_deadline()))
    thread.start()
    thread.join()

    assert seen == [4]  # a thread of its own: the deferred writer, a request's thread
    assert durably(current_deadline) == 4  # a durable write, in its own transaction
    with answers_within(1):
        assert current_deadline() == 1
        assert durably(current_deadline) == 1
    with answers_within(None):
        assert current_deadline() is None


@pytest.mark.parametrize(
    "starts",
    [
        pytest.param("import config.wsgi", id="the web server"),
        pytest.param(
            "from celery.signals import worker_init; import config.celery;"
            "worker_init.send(sender=None)",
            id="a Celery worker",
        ),
    ],
)
def test_the_web_server_and_the_workers_bound_their_processes_and_manage_py_does_not(starts):
    """config.wsgi (gunicorn, runserver) and a starting Celery worker (config.celery) bound their
    process; Django set up alone, as manage.py does (migrations), does not."""
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings';"
        "django.setup(); from core.postgresql.base import current_deadline as d;"
        f"print(d()); {starts}; print(d())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", str(settings.GARANTE_DB_ANSWER_SECONDS)]


def test_a_forked_worker_ends_its_own_late_exchanges():
    """gunicorn and Celery fork their workers from a parent that may have watched exchanges
    already: the watchdog thread is not inherited, so each child starts its own."""
    from core.postgresql.base import _watchdog

    parent_side, _ = socket.socketpair()
    _watchdog.forget(_watchdog.watch(parent_side.fileno(), time.monotonic() + 60))
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a socket whose peer never answers, watched for 0.1 s
        try:
            mine, _peer = socket.socketpair()
            _watchdog.watch(mine.fileno(), time.monotonic() + 0.1)
            mine.settimeout(WAIT_SECONDS)
            os.write(writer, b"ended" if mine.recv(1) == b"" else b"answered")
        except OSError:
            os.write(writer, b"still waiting")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)

    assert os.read(reader, 32) == b"ended"  # shut down: the end of the stream
