"""Whether identify_contact's answer time tells an existing identifier from an unknown one.

Calls the tool in process (call_tool, the path of both surfaces, without the network) through
one gateway credential, alternating a customer's phone and phones nobody has, each in a new
conversation, in two phases: with the credential under its limit (the answers differ by
design: identified, or not found), and once it has reached it, in verified mode (the answer
must be the same, in content, in statements and in time: medians within 10 %). Prints the
median, the 10th and 90th percentiles and the statements per call of each group, in ms, and
the medians' difference. The codes of verified mode are published to a queue of this run's
own in Redis (as in production: no task runs in process), deleted at the end. Run against a
migrated scratch database of its own (it creates a company each run):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/garante_timing \\
        .venv/bin/python bench/identify_timing.py [calls per group]

docs/identity-limits.md records a run.
"""

import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("GARANTE_LOG_LEVEL", "WARNING")
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")

from bench.config import SERVER_ENV  # noqa: E402

os.environ.update(SERVER_ENV)
TIMING_QUEUE = f"bench-identify-timing-{uuid.uuid4().hex[:8]}"
os.environ["GARANTE_VERIFICATION_QUEUE"] = TIMING_QUEUE
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"

import django  # noqa: E402

django.setup()

import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection, reset_queries  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from core.models import Company  # noqa: E402
from core.selectors import gateway_company_authenticate  # noqa: E402
from core.services import contact_create, gateway_credential_issue  # noqa: E402
from tooling.context import CallMeta  # noqa: E402
from tooling.execution import call_tool  # noqa: E402
from tooling.registry import registry  # noqa: E402

CUSTOMER_PHONE = "600111222"


def answer_of(outcome) -> str:
    if outcome.is_error:
        return outcome.body["code"]
    return "identified" if outcome.body["identified"] else "awaiting_code"


def timed_call(token: str, phone: str) -> tuple[float, str, int]:
    """The call's time in ms, its answer and how many statements it sent."""
    company = gateway_company_authenticate(token)
    meta = CallMeta(conversation_id=f"timing-{uuid.uuid4().hex}", idempotency_key=uuid.uuid4().hex)
    reset_queries()  # the log keeps 9,000 statements: counted from empty
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        outcome = call_tool(
            registry.get("identify_contact"),
            company=company,
            arguments={"phone": phone},
            meta=meta,
            surface="mcp",
        )
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, answer_of(outcome), len(queries)


def summary(label: str, samples: list[float], answers: set[str], statements: set[int]) -> str:
    deciles = statistics.quantiles(samples, n=10)
    return (
        f"{label:<28} n={len(samples):<4} median={statistics.median(samples):6.2f} "
        f"p10={deciles[0]:6.2f} p90={deciles[-1]:6.2f}  statements={sorted(statements)} "
        f"answers={sorted(answers)}"
    )


def phase(token: str, calls: int, unknown_phones) -> None:
    groups: dict[str, tuple[list[float], set[str], set[int]]] = {
        "existing": ([], set(), set()),
        "unknown": ([], set(), set()),
    }
    for _ in range(calls):
        for group, phone in (("existing", CUSTOMER_PHONE), ("unknown", next(unknown_phones))):
            elapsed, answer, statements = timed_call(token, phone)
            groups[group][0].append(elapsed)
            groups[group][1].add(answer)
            groups[group][2].add(statements)
    for group, (samples, answers, statements) in groups.items():
        print(summary(group, samples, answers, statements))
    existing, unknown = (statistics.median(groups[g][0]) for g in ("existing", "unknown"))
    print(f"{'medians differ by':<28} {abs(existing - unknown) / min(existing, unknown):.1%}")


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    slug = f"timing-{uuid.uuid4().hex[:8]}"
    company = Company.objects.create(name="Timing", slug=slug, environment="sandbox")
    contact_create(company=company, first_name="Ana", phone=CUSTOMER_PHONE)
    _, token = gateway_credential_issue(company=company, name="timing")
    unknown_phones = iter(str(n) for n in range(699_000_000, 699_999_999))
    # Under the limit: raise it past this run's failures, then warm the caches up.
    Company.objects.filter(pk=company.pk).update(identify_failures_per_credential=10_000)
    for _ in range(20):
        timed_call(token, next(unknown_phones))
    print(f"database: {company._state.db} ({os.environ.get('DATABASE_URL', 'sqlite')})")
    print("-- under the credential's limit (answers differ by design)")
    phase(token, calls, unknown_phones)
    # At the limit: as low as the failures already counted. The customer's codes stay
    # queued (no worker runs), so no send limit is in the way of the run.
    Company.objects.filter(pk=company.pk).update(identify_failures_per_credential=1)
    from core.selectors import authentications

    authentications.forget()
    print("-- the credential at its limit: verified mode (answers must not differ)")
    try:
        phase(token, calls, unknown_phones)
    finally:
        broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        for key in broker.scan_iter(match=f"*{TIMING_QUEUE}*"):
            broker.delete(key)
        broker.close()


if __name__ == "__main__":
    main()
