"""The PostgreSQL backend's health check of kept connections (core/postgresql): no round trip
for a healthy idle connection, Django's full check when the server has closed it. And its
options (core/settings.py): parameters bound by the server, hot statements prepared."""

import select
import time

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

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


def test_a_healthy_idle_connection_is_kept_without_a_round_trip(kept, monkeypatch):
    pid = backend_pid(kept)
    next_request(kept)

    def no_round_trip():
        raise AssertionError("SELECT 1 sent to a healthy idle connection")

    monkeypatch.setattr(kept, "is_usable", no_round_trip)
    kept.close_if_health_check_failed()

    monkeypatch.undo()
    assert kept.health_check_done is True
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
