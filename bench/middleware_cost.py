"""What each of Garante's middleware adds to GET /api/ping, in process: the profile of the
ping's target (docs/performance.md), where cProfile's shares say only "Django".

Django's WSGI handler is called directly (no server, no network), with the shipped
settings, as shipped and then with one group of middleware taken out at a time; the last
row keeps only the two the bare django-ninja baseline has (SecurityMiddleware and
CommonMiddleware). Rows are measured in interleaved rounds and each row's median is reported
with its difference from the shipped stack. The request lines go to the null device, so a
line's cost is its formatting and its write call, not a terminal's.

    .venv/bin/python bench/middleware_cost.py [calls per round]

GET /api/ping touches no database; DATABASE_URL need only name one (the bench's by default).
"""

import io
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["GARANTE_LOG_LEVEL"] = "INFO"  # the request line on, as shipped

from bench.config import in_process_environment  # noqa: E402

in_process_environment()

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.handlers.wsgi import WSGIHandler  # noqa: E402
from django.test import override_settings  # noqa: E402

ROUNDS = 5
# The groups taken out one at a time (each a row): a name and the dotted paths' fragments.
GROUPS: dict[str, tuple[str, ...]] = {
    "browser-only wrappers and the staff language": (
        "SessionMiddleware",
        "LocaleMiddleware",
        "CsrfViewMiddleware",
        "AuthenticationMiddleware",
        "StaffLanguageMiddleware",
        "MessageMiddleware",
        "XFrameOptionsMiddleware",
    ),
    "health probes and the Host check": ("HealthProbes", "RefuseUnknownHosts"),
    "MachineApiErrors (the call's deadline) and WhiteNoise": (
        "MachineApiErrors",
        "WhiteNoiseMiddleware",
    ),
    "the request log middleware (id, metrics, line)": ("RequestLogMiddleware",),
}
BARE = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
)


def without(fragments: Iterable[str]) -> list[str]:
    """settings.MIDDLEWARE without the entries whose path contains one of `fragments`."""
    fragments = tuple(fragments)
    kept = [m for m in settings.MIDDLEWARE if not any(f in m for f in fragments)]
    if len(kept) == len(settings.MIDDLEWARE):
        raise LookupError(f"no middleware matches {fragments}")
    return kept


def ping_environ() -> dict:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/api/ping",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }


def caller(middleware: list[str], *, line: bool = True) -> Callable[[], None]:
    """One GET /api/ping through a handler built on `middleware`; `line`: the request line on."""
    with override_settings(MIDDLEWARE=middleware):
        handler = WSGIHandler()
    requests = logging.getLogger("garante.requests")
    level = logging.NOTSET if line else logging.WARNING

    def call() -> None:
        requests.setLevel(level)
        statuses: list[str] = []
        answer = handler(
            ping_environ(), lambda status, headers, exc_info=None: statuses.append(status)
        )
        b"".join(answer)
        answer.close()
        if statuses != ["200 OK"]:
            raise RuntimeError(f"GET /api/ping answered {statuses}")

    return call


def rows() -> dict[str, Callable[[], None]]:
    shipped = list(settings.MIDDLEWARE)
    made = {
        "as shipped": caller(shipped),
        "as shipped, the request line off": caller(shipped, line=False),
    }
    for name, fragments in GROUPS.items():
        made[f"without {name}"] = caller(without(fragments))
    made["SecurityMiddleware and CommonMiddleware only (the bare baseline's)"] = caller(list(BARE))
    return made


def measure(calls: int) -> dict[str, float]:
    """Each row's median CPU per call (µs) over ROUNDS interleaved rounds."""
    made = rows()
    for call in made.values():
        for _ in range(200):
            call()
    per_round: dict[str, list[float]] = {name: [] for name in made}
    for round_ in range(ROUNDS):
        order = list(made) if round_ % 2 == 0 else list(reversed(made))
        for name in order:
            call = made[name]
            started = time.process_time()
            for _ in range(calls):
                call()
            per_round[name].append((time.process_time() - started) * 1e6 / calls)
    logging.getLogger("garante.requests").setLevel(logging.NOTSET)
    return {name: statistics.median(values) for name, values in per_round.items()}


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    null = open(os.devnull, "w")  # noqa: SIM115  (open for the run)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(null)
    results = measure(calls)
    shipped = results["as shipped"]
    print(f"\nGET /api/ping in process: CPU per call, median of {ROUNDS} rounds x {calls} calls\n")
    print(f"{'stack':<70}{'µs':>8}{'vs shipped':>12}")
    for name, micros in results.items():
        print(f"{name:<70}{micros:>8.1f}{micros - shipped:>+12.1f}")


if __name__ == "__main__":
    main()
