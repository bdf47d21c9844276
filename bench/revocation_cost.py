"""What refusing a revoked gateway token within 1 s costs (issue #42): the process cache's miss
and hit, the invalidation's publish and its arrival over Redis.

Each process keeps a token's company for GARANTE_PROCESS_CACHE_SECONDS (core.process_cache),
so it reads the token's row at most once per lifetime: the cost per request of a lifetime L at
R requests a second per process is one miss every L seconds, spread over L x R requests. Where
the processes share a Redis (GARANTE_REDIS_URL, or the Celery broker's), a revocation is also
published there, and every process forgets the token when the message arrives. This measures,
in process against the database of DATABASE_URL (a migrated scratch database: it creates a
company each run) and the Redis of CELERY_BROKER_URL:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/garante_timing \\
        .venv/bin/python bench/revocation_cost.py [calls]

docs/performance.md ("What revocation within 1 s costs") records a run.
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

import redis  # noqa: E402
from django.conf import settings  # noqa: E402

from core import process_cache  # noqa: E402
from core.models import Company  # noqa: E402
from core.selectors import authentications, gateway_company_authenticate  # noqa: E402
from core.services import gateway_credential_issue  # noqa: E402


def timed(call, n: int) -> list[float]:
    """Microseconds per call, each timed alone."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


def line(label: str, samples: list[float]) -> str:
    deciles = statistics.quantiles(samples, n=10)
    return (
        f"{label:<44} n={len(samples):<5} median={statistics.median(samples):8.1f} us "
        f"p10={deciles[0]:8.1f} p90={deciles[-1]:8.1f}"
    )


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    company = Company.objects.create(
        name="Revocation timing", slug=f"revocation-{uuid.uuid4().hex[:8]}", environment="sandbox"
    )
    _, token = gateway_credential_issue(company=company, name="timing")
    print(
        f"database: {os.environ.get('DATABASE_URL', 'sqlite')}  redis: {settings.CELERY_BROKER_URL}"
    )

    def miss() -> None:
        authentications.forget()
        gateway_company_authenticate(token)

    gateway_company_authenticate(token)
    hit = timed(lambda: gateway_company_authenticate(token), calls)
    missed = timed(miss, calls)
    print(line("token lookup, cached (hit)", hit))
    print(line("token lookup, read from the database (miss)", missed))
    extra = statistics.median(missed) - statistics.median(hit)
    for lifetime in (5, 1):
        for rate in (1, 10, 100, 1000):
            # Fewer than one request a lifetime: each one misses.
            per_request = extra / max(1.0, lifetime * rate)
            print(
                f"  lifetime {lifetime} s at {rate:>4} req/s per process: "
                f"+{per_request:7.2f} us per request"
            )

    # The broadcast: this process subscribed (as every web process is), a revocation published.
    url = process_cache.broadcast_url() or settings.CELERY_BROKER_URL
    settings.GARANTE_REDIS_URL = url
    process_cache._broadcast.keeping()
    deadline = time.monotonic() + 5
    while not process_cache._broadcast._subscribed and time.monotonic() < deadline:
        time.sleep(0.01)
    publisher = redis.Redis.from_url(url)
    channel = process_cache._broadcast._channel()
    publish, arrive = [], []
    for _ in range(min(calls, 500)):
        seen = process_cache._broadcast.generation
        started = time.perf_counter()
        publisher.publish(channel, f'["gateway authentications", {company.pk}]')
        published = time.perf_counter()
        while process_cache._broadcast.generation == seen:
            time.sleep(0)
        arrived = time.perf_counter()
        publish.append((published - started) * 1e6)
        arrive.append((arrived - started) * 1e6)
    print(line("revocation published (one PUBLISH)", publish))
    print(line("... and forgotten in a subscribed process", arrive))


if __name__ == "__main__":
    main()
