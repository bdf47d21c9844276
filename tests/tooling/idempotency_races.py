"""Concurrent duplicates of one call against a multi-worker gunicorn on PostgreSQL: run by
tests/tooling/test_idempotency_concurrency.py, and again through PgBouncer by
tests/cluster/test_pgbouncer.py."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from django.conf import settings

from core.models import IdempotencyRecord
from tests.servers import GunicornServer, wait_for
from tests.testapp.models import Counter

INCREMENT = "/api/tools/testapp_increment_counter"
CALLS = 50


def post_all_at_once(url: str, token: str, bodies_and_keys: list[tuple[dict, str]]) -> list:
    """Send every request from its own connection, released together by a barrier."""
    barrier = threading.Barrier(len(bodies_and_keys))

    def send(body_and_key: tuple[dict, str]) -> httpx.Response:
        body, key = body_and_key
        with httpx.Client(base_url=url, timeout=60) as http:
            http.get("/api/ping")  # connect first, so the barrier releases requests, not dials
            barrier.wait()
            return http.post(
                INCREMENT,
                json=body,
                headers={
                    "Authorization": f"Bearer {token}",
                    "X-Conversation-Id": "conv-1",
                    "Idempotency-Key": key,
                },
            )

    with ThreadPoolExecutor(max_workers=len(bodies_and_keys)) as pool:
        return list(pool.map(send, bodies_and_keys))


def fifty_identical_calls_at_once(gunicorn_server, company, token) -> None:
    """Fifty copies of one call (one key) at once on a multi-worker gunicorn: one effect, fifty
    identical answers, 49 of them replays."""
    server = gunicorn_server(workers=3, threads=8)
    body = {"name": "visits", "hold_ms": 300}  # the first holds its transaction open a while

    responses = post_all_at_once(server.url, token, [(body, "same-op")] * CALLS)

    assert [r.status_code for r in responses] == [200] * CALLS, server.log()
    assert {r.content for r in responses} == {b'{"counter":"visits","value":1,"by":1}'}
    replayed = [r for r in responses if r.headers.get("X-Idempotency-Replayed") == "true"]
    assert len(replayed) == CALLS - 1
    assert Counter.objects.get(company=company, name="visits").value == 1
    assert IdempotencyRecord.objects.get(company=company, key="same-op").replay_count == CALLS - 1


def fifty_different_calls_at_once(gunicorn_server, company, token) -> None:
    """Fifty different calls (fifty keys) at once: each takes effect once."""
    server = gunicorn_server(workers=3, threads=8)
    Counter.objects.create(company=company, name="visits")

    responses = post_all_at_once(
        server.url, token, [({"name": "visits"}, f"op-{n}") for n in range(CALLS)]
    )

    assert [r.status_code for r in responses] == [200] * CALLS, server.log()
    assert sorted(r.json()["value"] for r in responses) == list(range(1, CALLS + 1))
    assert not any("X-Idempotency-Replayed" in r.headers for r in responses)
    assert Counter.objects.get(company=company, name="visits").value == CALLS


def holding_server(gunicorn_server, tmp_path: Path, **options) -> tuple[GunicornServer, Path]:
    """A server whose held effects say so: the file returned appears once one is holding."""
    marker = tmp_path / "holding"
    env = {**options.pop("env", {}), "GARANTE_TESTAPP_HOLD_MARKER": str(marker)}
    return gunicorn_server(env=env, **options), marker


def duplicate_past_the_bound(server: GunicornServer, token: str, holding: Path) -> None:
    """The first call holds its effect for 3 s; its twin, sent once the first is holding,
    waits past the bound, is told to retry, and the retry replays the first's answer."""
    body = {"name": "visits", "hold_ms": 3000}
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Conversation-Id": "conv-1",
        "Idempotency-Key": "slow-op",
    }
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        http.get("/api/ping")
        with ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(http.post, INCREMENT, json=body)
            # The first has inserted its record and is holding it.
            wait_for(holding.exists, timeout=30, interval=0.01)
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as twin:
                started = time.monotonic()
                waited = twin.post(INCREMENT, json=body)
                waited_for = time.monotonic() - started
            first = first.result()
        retry = http.post(INCREMENT, json=body)

    assert waited.status_code == 409, server.log()
    assert waited.json()["error_type"] == "CONFLICT"
    assert waited.json()["code"] == "request_in_progress"
    assert waited.headers["Retry-After"] == str(waited.json()["retry_after_seconds"])
    assert waited.headers["Retry-After"] == str(settings.GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS)
    assert 0.3 <= waited_for < 2.5  # bounded by the wait limit, not by the 3 s effect
    assert first.status_code == 200
    assert first.json()["value"] == 1
    assert retry.status_code == 200
    assert retry.headers["X-Idempotency-Replayed"] == "true"
    assert retry.content == first.content


def a_duplicate_past_the_bound(gunicorn_server, company, token, tmp_path) -> None:
    """A duplicate that waits past the bound is told to retry, and its retry replays."""
    server, holding = holding_server(
        gunicorn_server,
        tmp_path,
        workers=2,
        threads=2,
        env={"GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS": "300"},
    )

    duplicate_past_the_bound(server, token, holding)

    assert Counter.objects.get(company=company, name="visits").value == 1
