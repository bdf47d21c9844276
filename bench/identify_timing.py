"""Whether identify_contact's answer time tells an existing identifier from an unknown one.

Calls the tool in process (call_tool, the path of both surfaces, without the network) through
one gateway credential, alternating a customer's phone and phones nobody has, each in a new
conversation, in two phases: with the credential under its limit (the answers differ by
design: identified, or not found), and once it has reached it (the answer must be the same,
in content and in time). Prints the median, the 10th and 90th percentiles per group, in ms.
Run against a migrated scratch database of its own (it creates a company each run):

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

import django  # noqa: E402

django.setup()

from core.models import Company  # noqa: E402
from core.selectors import gateway_company_authenticate  # noqa: E402
from core.services import contact_create, gateway_credential_issue  # noqa: E402
from tooling.context import CallMeta  # noqa: E402
from tooling.execution import call_tool  # noqa: E402
from tooling.registry import registry  # noqa: E402

CUSTOMER_PHONE = "600111222"


def timed_call(token: str, phone: str) -> tuple[float, str]:
    company = gateway_company_authenticate(token)
    meta = CallMeta(conversation_id=f"timing-{uuid.uuid4().hex}", idempotency_key=uuid.uuid4().hex)
    started = time.perf_counter()
    outcome = call_tool(
        registry.get("identify_contact"),
        company=company,
        arguments={"phone": phone},
        meta=meta,
        surface="mcp",
    )
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, "identified" if not outcome.is_error else outcome.body["code"]


def summary(label: str, samples: list[float], answers: set[str]) -> str:
    deciles = statistics.quantiles(samples, n=10)
    return (
        f"{label:<28} n={len(samples):<4} median={statistics.median(samples):6.2f} "
        f"p10={deciles[0]:6.2f} p90={deciles[-1]:6.2f}  answers={sorted(answers)}"
    )


def phase(token: str, calls: int, unknown_phones) -> None:
    groups: dict[str, tuple[list[float], set[str]]] = {
        "existing": ([], set()),
        "unknown": ([], set()),
    }
    for _ in range(calls):
        for group, phone in (("existing", CUSTOMER_PHONE), ("unknown", next(unknown_phones))):
            elapsed, answer = timed_call(token, phone)
            groups[group][0].append(elapsed)
            groups[group][1].add(answer)
    for group, (samples, answers) in groups.items():
        print(summary(group, samples, answers))


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
    # At the limit: as low as the failures already counted.
    Company.objects.filter(pk=company.pk).update(identify_failures_per_credential=1)
    from core.selectors import authentications

    authentications.forget()
    print("-- the credential at its limit (answers must not differ)")
    phase(token, calls, unknown_phones)


if __name__ == "__main__":
    main()
