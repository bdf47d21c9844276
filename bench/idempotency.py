"""Benchmark of the idempotency engine: a replay versus a first execution, and SQL per call.

Not a test (nothing is asserted): it prints numbers. Runs in process, against a throw-away
database created with Django's test utilities (PostgreSQL when reachable, as in the tests;
`DATABASE_URL=sqlite:///...` for the demo configuration), through the same REST tool path
the Gateway uses (Django's test client: the full request cycle, without the network):

    make bench            # or: .venv/bin/python bench/idempotency.py [calls]
"""

import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("GARANTE_TEST_DB_NAME", "bench_idem")
os.environ.setdefault("GARANTE_LOG_LEVEL", "WARNING")
# As shipped (tests.settings writes them at once): trace rows and replay counters are queued
# and written in batches by core.deferred, so they are not among a call's statements.
os.environ.setdefault("GARANTE_DEFERRED_WRITE_SECONDS", "0.5")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import (  # noqa: E402
    CaptureQueriesContext,
    setup_test_environment,
    teardown_test_environment,
)

from core.deferred import deferred_writer_stop  # noqa: E402
from core.idempotency import idempotent_execute  # noqa: E402
from core.models import Company  # noqa: E402
from core.services import gateway_credential_issue  # noqa: E402

WRITE_TOOL = "/api/tools/testapp_increment_counter"
READ_TOOL = "/api/tools/testapp_read_counter"


def timed(calls: list[Callable[[], object]]) -> tuple[list[float], float]:
    """Wall milliseconds of each call, and the process's CPU milliseconds per call: what a
    worker spends, which waiting on the database (a commit's WAL flush) and other load on a
    shared machine do not change as much."""
    samples = []
    cpu_started = time.process_time()
    for call in calls:
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples, (time.process_time() - cpu_started) * 1000 / len(calls)


def queries_of(calls: list[Callable[[], object]]) -> list[int]:
    counts = []
    for call in calls:
        with CaptureQueriesContext(connection) as captured:
            call()
        counts.append(len(captured.captured_queries))
    return counts


def row(label: str, timing: tuple[list[float], float], counts: list[int]) -> str:
    samples, cpu = timing
    p95 = statistics.quantiles(samples, n=20)[-1]
    spread = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
    median, mean = statistics.median(samples), statistics.mean(samples)
    return f"{label:<38} {median:>8.2f} {p95:>8.2f} {mean:>8.2f} {cpu:>8.2f} {spread:>9}"


def run(calls: int) -> None:
    company = Company.objects.create(name="Bench", slug=f"bench-{uuid.uuid4().hex[:6]}")
    token = gateway_credential_issue(company=company, name="bench")[1]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_X_CONVERSATION_ID="conv-bench")

    def post(path: str, body: dict, key: str | None = None) -> Callable[[], object]:
        headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}

        def call() -> object:
            response = client.post(path, body, content_type="application/json", **headers)
            assert response.status_code == 200, response.content
            return response

        return call

    # Warm up imports, connections and caches.
    for n in range(20):
        post(WRITE_TOOL, {"name": "warm"}, f"warm-{n}")()
        post(READ_TOOL, {"name": "warm"})()

    body = {"name": "visits", "tags": ["a", "b"], "note": "bench"}
    post(WRITE_TOOL, body, "replayed-key")()
    lines = []
    for label, make in (
        ("REST read tool (no engine)", lambda n, tag: post(READ_TOOL, {"name": "visits"})),
        ("REST write, first execution", lambda n, tag: post(WRITE_TOOL, body, f"{tag}-{n}")),
        ("REST write, replay", lambda n, tag: post(WRITE_TOOL, body, "replayed-key")),
    ):
        timing = timed([make(n, "t") for n in range(calls)])
        counts = queries_of([make(n, "q") for n in range(min(calls, 20))])
        lines.append(row(label, timing, counts))

    def engine(key: str) -> Callable[[], object]:
        return lambda: idempotent_execute(
            company=company,
            key=key,
            operation="bench",
            request=body,
            effect=lambda: ({"ok": True, "items": list(range(20))}, 200),
        )

    engine("engine-replayed")()
    for label, make in (
        ("engine only, first (empty effect)", lambda n, tag: engine(f"engine-{tag}-{n}")),
        ("engine only, replay", lambda n, tag: engine("engine-replayed")),
    ):
        timing = timed([make(n, "t") for n in range(calls)])
        counts = queries_of([make(n, "q") for n in range(min(calls, 20))])
        lines.append(row(label, timing, counts))

    with CaptureQueriesContext(connection) as replay_queries:
        post(WRITE_TOOL, body, "replayed-key")()
    with CaptureQueriesContext(connection) as first_queries:
        post(WRITE_TOOL, body, "one-more-first")()

    print(
        f"\nIdempotency engine on {connection.vendor}, {calls} calls per row "
        "(ms per call: wall median, p95 and mean; the process's CPU)\n"
    )
    print(f"{'':<38} {'median':>8} {'p95':>8} {'mean':>8} {'cpu':>8} {'queries':>9}")
    print("\n".join(lines))
    for title, captured in (("replay", replay_queries), ("first execution", first_queries)):
        print(f"\nSQL of one REST {title}:")
        for query in captured.captured_queries:
            print(f"  {query['sql'][:110]}")


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    setup_test_environment()
    started = time.monotonic()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        print(f"(throw-away database ready in {time.monotonic() - started:.1f} s)")
        run(calls)
    finally:
        deferred_writer_stop()  # writes what is queued and closes the writer's connection
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
