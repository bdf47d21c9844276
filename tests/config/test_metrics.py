"""GET /metrics: Prometheus text behind a token, counters that move by exactly what happened
(tool calls, idempotency outcomes, verification codes, Celery tasks, requests), and one scrape
of a gunicorn with two workers summing both."""

import json
import re
import threading
import uuid
from collections import Counter as Tally
from pathlib import Path

import httpx
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core.jobs import task_named
from core.services import contact_create
from core.sms import LocmemBackend
from tests.factories import ANA_DOCUMENT, ANA_PHONE_NATIONAL
from tests.servers import (
    free_port,
    postgresql_test_database_url,
    start_celery_worker,
    wait_for,
)

METRICS_TOKEN = "scrape-token-for-tests"

Sample = tuple[str, frozenset[tuple[str, str]]]


def parse(text: str) -> Tally:
    """Every sample of an exposition, keyed by (name, labels)."""
    values: Tally = Tally()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, frozenset(sample.labels.items()))] += sample.value
    return values


def delta(before: Tally, after: Tally, name: str, **labels: str) -> float:
    """How much the samples named `name` whose labels include `labels` moved."""
    wanted = set(labels.items())

    def total(values: Tally) -> float:
        return sum(v for (n, ls), v in values.items() if n == name and wanted <= ls)

    return total(after) - total(before)


@pytest.fixture
def metrics_on(settings):
    settings.GARANTE_METRICS_TOKEN = METRICS_TOKEN


@pytest.fixture
def sms_outbox(settings):
    settings.GARANTE_SMS_BACKEND = "locmem"
    LocmemBackend.outbox.clear()
    yield LocmemBackend.outbox
    LocmemBackend.outbox.clear()


def scrape(client: Client) -> Tally:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return parse(response.content.decode())


class Rest:
    """Tool calls over the REST mirror through the whole Django stack, in process."""

    def __init__(self, token: str) -> None:
        self.client = Client()
        self.token = token
        self.conversation = f"conv-{uuid.uuid4().hex[:8]}"

    def call(self, name: str, arguments: dict, *, key: str | None = None):
        headers = {"Authorization": f"Bearer {self.token}", "X-Conversation-Id": self.conversation}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.client.post(
            f"/api/tools/{name}",
            data=json.dumps(arguments),
            content_type="application/json",
            headers=headers,
        )


@pytest.mark.django_db
def test_metrics_are_off_without_a_token_configured(client, settings):
    settings.GARANTE_METRICS_TOKEN = ""

    response = client.get("/metrics", headers={"Authorization": "Bearer anything"})

    assert response.status_code == 404
    assert b"garante_" not in response.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token", f"Basic {METRICS_TOKEN}", "Bearer"]
)
def test_metrics_without_their_token_are_refused(client, metrics_on, authorization):
    headers = {"Authorization": authorization} if authorization else {}

    response = client.get("/metrics", headers=headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"garante_" not in response.content


@pytest.mark.django_db
def test_a_scrape_after_a_few_calls_moved_each_counter_by_exactly_those_calls(
    metrics_on, company, token
):
    rest = Rest(token)
    scraper = Client()
    before = scrape(scraper)

    # Two reads, an argument error, a first write, its replay and a conflict on its key.
    assert rest.call("testapp_read_counter", {"name": "c"}).status_code == 200
    assert rest.call("testapp_read_counter", {"name": "c"}).status_code == 200
    assert rest.call("testapp_read_counter", {"name": ""}).status_code == 422
    assert rest.call("testapp_increment_counter", {"name": "c"}, key="k-1").status_code == 200
    replay = rest.call("testapp_increment_counter", {"name": "c"}, key="k-1")
    assert replay.headers["X-Idempotency-Replayed"] == "true"
    other = rest.call("testapp_increment_counter", {"name": "c", "by": 2}, key="k-1")
    assert other.json()["code"] == "idempotency_conflict"
    # A write whose effect fails: nothing stored, so neither executed nor replayed.
    failed = rest.call("testapp_fail_after_write", {"name": "c", "failure": "business"}, key="k-2")
    assert failed.json()["code"] == "counter_full"

    after = scrape(scraper)

    def tool(name: str, outcome: str = "ok", error_type: str = "") -> float:
        return delta(
            before,
            after,
            "garante_tool_calls_total",
            tool=name,
            surface="rest",
            outcome=outcome,
            error_type=error_type,
        )

    assert tool("testapp_read_counter") == 2
    assert tool("testapp_read_counter", "error", "VALIDATION") == 1
    assert tool("testapp_increment_counter") == 2  # the first run and its replay
    assert tool("testapp_increment_counter", "error", "CONFLICT") == 1
    assert tool("testapp_fail_after_write", "error", "VALIDATION") == 1
    duration = "garante_tool_call_duration_seconds_count"
    assert delta(before, after, duration, tool="testapp_read_counter", surface="rest") == 3
    assert delta(before, after, duration, surface="rest") == 7
    assert delta(before, after, "garante_tool_calls_total", surface="mcp") == 0

    idempotency = "garante_idempotency_outcomes_total"
    assert delta(before, after, idempotency, outcome="executed") == 1
    assert delta(before, after, idempotency, outcome="replayed") == 1
    assert delta(before, after, idempotency, outcome="conflict") == 1
    assert delta(before, after, idempotency, outcome="joined") == 0

    requests = "garante_http_requests_total"
    assert delta(before, after, requests, surface="rest") == 7
    assert delta(before, after, requests, surface="rest", status="200") == 4
    assert delta(before, after, requests, surface="rest", status="422") == 2
    assert delta(before, after, requests, surface="rest", status="409") == 1
    assert delta(before, after, "garante_http_request_duration_seconds_count", surface="rest") == 7
    # Scrapes are neither logged nor counted.
    assert delta(before, after, requests, surface="other") == 0


@pytest.mark.django_db(transaction=True)  # codes are committed on a connection of their own
def test_verification_codes_and_their_delivery_tasks_are_counted(
    metrics_on, company, token, sms_outbox
):
    contact_create(
        company=company, first_name="Ana", document_number=ANA_DOCUMENT, phone=ANA_PHONE_NATIONAL
    )
    rest = Rest(token)
    scraper = Client()
    before = scrape(scraper)

    # A code sent (its delivery task runs in process) and used; then another, guessed wrong
    # four times, and a fifth wrong guess that locks it.
    assert rest.call("identify_contact", {"document": ANA_DOCUMENT}, key="k-1").status_code == 200
    send = {"identifier": ANA_DOCUMENT, "channel": "sms"}
    assert rest.call("request_verification_code", send, key="k-send-1").status_code == 200
    first = re.search(r"\b(\d{6})\b", sms_outbox[0].body).group(1)
    used = rest.call("verify_code", {"identifier": ANA_DOCUMENT, "code": first}, key="k-use")
    assert used.status_code == 200
    assert rest.call("request_verification_code", send, key="k-send-2").status_code == 200
    second = re.search(r"\b(\d{6})\b", sms_outbox[1].body).group(1)
    wrong = f"{(int(second) + 1) % 1_000_000:06d}"
    guesses = [
        rest.call("verify_code", {"identifier": ANA_DOCUMENT, "code": wrong}, key=f"k-g{n}")
        for n in range(5)
    ]
    assert [g.json()["code"] for g in guesses] == ["wrong_code"] * 4 + ["verification_locked"]

    after = scrape(scraper)

    codes = "garante_verification_codes_total"
    assert delta(before, after, codes, event="issued") == 2
    assert delta(before, after, codes, event="sent") == 2
    assert delta(before, after, codes, event="wrong") == 5
    assert delta(before, after, codes, event="locked") == 1
    assert delta(before, after, codes, event="verified") == 1
    assert delta(before, after, codes, event="delivery_failed") == 0
    tasks = "garante_celery_tasks_total"
    assert delta(before, after, tasks, task="core.challenge_deliver", outcome="success") == 2
    assert delta(before, after, tasks, outcome="failure") == 0


def _call_mcp(url: str, token: str, key: str, hold_ms: int) -> httpx.Response:
    # A connection of its own: a sync worker busy with one call cannot accept the next.
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "testapp_increment_counter",
            "arguments": {"name": "shared", "hold_ms": hold_ms},
            "_meta": {"com.asixto/conversationId": "conv-m", "com.asixto/idempotencyKey": key},
        },
    }
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
    with httpx.Client(timeout=30) as http:
        return http.post(f"{url}/mcp", json=body, headers=headers)


def test_one_scrape_of_gunicorn_sums_the_calls_of_both_its_workers(
    gunicorn_server, company, token, tmp_path: Path
):
    """Two identical calls at once, each holding its effect open, need both sync workers (one
    call at a time each): the second waits for the first's key and replays its answer (a join),
    so one worker counted the run and the other the join. Then a few more calls. Whichever
    worker answers a scrape, it counts every call of both."""
    directory = tmp_path / "metrics"
    server = gunicorn_server(
        workers=2,
        threads=1,
        env={"GARANTE_METRICS_TOKEN": METRICS_TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(directory)},
    )

    def writers() -> set[int]:
        # Each worker opens its files when it loads the app (core.metrics binds its series).
        files = {int(p.stem.rsplit("_", 1)[1]) for p in directory.glob("counter_*.db")}
        return files & _worker_pids(server.process.pid)

    assert len(wait_for(lambda: writers() if len(writers()) == 2 else None)) == 2
    answers: list[httpx.Response] = []
    twins = [
        threading.Thread(target=lambda: answers.append(_call_mcp(server.url, token, "k-0", 1500)))
        for _ in range(2)
    ]
    for twin in twins:
        twin.start()
    for twin in twins:
        twin.join(timeout=60)
    for n in range(1, 5):
        answers.append(_call_mcp(server.url, token, f"k-{n}", 0))
    assert [a.status_code for a in answers] == [200] * 6
    assert all(a.json()["result"]["isError"] is False for a in answers)

    scrapes = []
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for _ in range(4):  # several scrapes, likely answered by either worker: all the same
            response = http.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
            assert response.status_code == 200
            scrapes.append(parse(response.text))
        assert http.get("/metrics").status_code == 401

    empty: Tally = Tally()
    for values in scrapes:
        calls = delta(
            empty,
            values,
            "garante_tool_calls_total",
            tool="testapp_increment_counter",
            surface="mcp",
            outcome="ok",
        )
        assert calls == 6
        outcomes = "garante_idempotency_outcomes_total"
        assert delta(empty, values, outcomes, outcome="executed") == 5
        assert delta(empty, values, outcomes, outcome="joined") == 1
        assert delta(empty, values, "garante_http_requests_total", surface="mcp") == 6


def _worker_pids(master: int) -> set[int]:
    """The processes whose parent is `master` (gunicorn's workers)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == master:
            found.add(int(stat.parent.name))
    return found


REDIS_DB = 12  # this module's own Redis database and queue: no other session's worker sees them


@pytest.mark.redis
def test_a_worker_answers_scrapes_of_its_tasks_on_a_port_of_its_own(
    django_db_blocker, celery_publisher, tmp_path
):
    port = free_port()
    with start_celery_worker(
        database_url=postgresql_test_database_url(django_db_blocker),
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        env={"GARANTE_WORKER_METRICS_PORT": str(port)},
    ) as worker:
        celery_publisher(worker.broker_url, queue=worker.queue)
        url = f"http://127.0.0.1:{port}/metrics"
        before = parse(httpx.get(url, timeout=10).text)
        for _ in range(3):
            task_named("core.challenge_deliveries_settle").delay()

        def settled() -> Tally | None:
            values = parse(httpx.get(url, timeout=10).text)
            moved = delta(
                before,
                values,
                "garante_celery_tasks_total",
                task="core.challenge_deliveries_settle",
                outcome="success",
            )
            return values if moved >= 3 else None

        after = wait_for(settled, timeout=60)

    tasks = "garante_celery_tasks_total"
    assert delta(before, after, tasks, task="core.challenge_deliveries_settle") == 3
    assert delta(before, after, tasks, outcome="failure") == 0
