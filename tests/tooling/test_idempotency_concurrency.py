"""Concurrent duplicates against real multi-process servers (gunicorn), PostgreSQL and SQLite.

The Gateway's model can emit the same call twice in one turn; the two copies may land on two
worker processes at the same instant. One effect, identical answers; a copy that waits too
long for its twin is told to retry (request_in_progress), never executed a second time.
"""

import httpx
import pytest

from tests.tooling.idempotency_races import (
    CALLS,
    a_duplicate_past_the_bound,
    duplicate_past_the_bound,
    fifty_different_calls_at_once,
    fifty_identical_calls_at_once,
    holding_server,
    post_all_at_once,
)

pytestmark = pytest.mark.django_db(transaction=True)


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


# --- SQLite, the demo configuration: BEGIN IMMEDIATE and a busy timeout -------------------

SEED_SQLITE = """
from core.models import Company
from core.services import gateway_credential_issue
company = Company.objects.create(name="Demo", slug="demo", environment="sandbox")
result = gateway_credential_issue(company=company, name="gateway")[1]
"""


@pytest.fixture
def seeded_sqlite(sqlite_database):
    database = sqlite_database()
    return database, database.run(SEED_SQLITE)


@pytest.fixture
def sqlite_server(gunicorn_server, seeded_sqlite):
    database, token = seeded_sqlite
    return gunicorn_server(workers=3, threads=4, database_url=database.url), token


def read_counter(server, token: str) -> int:
    response = httpx.post(
        f"{server.url}/api/tools/testapp_read_counter",
        json={"name": "visits"},
        headers={"Authorization": f"Bearer {token}", "X-Conversation-Id": "conv-1"},
    )
    return response.json()["value"]


def test_on_sqlite_fifty_identical_calls_have_one_effect_and_identical_answers(sqlite_server):
    server, token = sqlite_server
    body = {"name": "visits", "hold_ms": 200}

    responses = post_all_at_once(server.url, token, [(body, "same-op")] * CALLS)

    assert [r.status_code for r in responses] == [200] * CALLS, server.log()
    assert {r.content for r in responses} == {b'{"counter":"visits","value":1,"by":1}'}
    assert read_counter(server, token) == 1
    assert "database is locked" not in server.log()


def test_on_sqlite_fifty_different_calls_are_serialised_without_lock_errors(sqlite_server):
    server, token = sqlite_server

    responses = post_all_at_once(
        server.url, token, [({"name": "visits", "hold_ms": 10}, f"op-{n}") for n in range(CALLS)]
    )

    assert [r.status_code for r in responses] == [200] * CALLS, server.log()
    assert sorted(r.json()["value"] for r in responses) == list(range(1, CALLS + 1))
    assert read_counter(server, token) == CALLS
    assert "database is locked" not in server.log()


def test_on_sqlite_a_duplicate_past_the_busy_timeout_is_told_to_retry(
    gunicorn_server, seeded_sqlite, tmp_path
):
    database, token = seeded_sqlite
    server, holding = holding_server(
        gunicorn_server,
        tmp_path,
        workers=2,
        threads=2,
        database_url=database.url,
        env={"GARANTE_SQLITE_BUSY_TIMEOUT_SECONDS": "0.3"},
    )

    duplicate_past_the_bound(server, token, holding)

    assert read_counter(server, token) == 1
