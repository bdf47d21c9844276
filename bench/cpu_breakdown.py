"""Where the CPU of one MCP tool call goes: worker CPU per call in process, with the process
caches and the deferred bookkeeping writes on (as shipped) and switched off one after the
other (as plain Django would be), next to the ceiling (a bare django-ninja endpoint).

Runs in process (Django's test client: the full request cycle without the network) against
the load benchmark's database, so run `bench/load.py` first:

    .venv/bin/python bench/cpu_breakdown.py [calls]
    .venv/bin/python bench/cpu_breakdown.py --profile list_services "open_case (first write)"

`--profile` runs each named scenario under cProfile and prints where its time goes (cProfile's
wall clock, each function's own time, so waiting for PostgreSQL shows as psycopg's), by layer
(Django, django-ninja, pydantic, psycopg, Garante's own packages, the rest) and by function:
bench/load.py runs it for every scenario that missed its target.

CPU is `time.process_time()` of this process, the deferred writer's thread included.
"""

import os
import sys
import time
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GARANTE_LOG_LEVEL", "WARNING")

from bench.config import CASE_ARGS, CUSTOMER, in_process_environment  # noqa: E402

in_process_environment()

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

from bench.processes import start_redis  # noqa: E402

# What the calls publish (open_case's staff notification) goes to a Redis of this run's own,
# as in bench/load.py, not into the queue of whatever Redis the machine runs.
_broker_dir = tempfile.mkdtemp(prefix="garante-cpu-breakdown-")
atexit.register(shutil.rmtree, _broker_dir, True)  # after the stop below (atexit is LIFO)
_broker = start_redis(Path(_broker_dir))
atexit.register(_broker.stop)
os.environ["CELERY_BROKER_URL"] = _broker.url

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.test import Client  # noqa: E402

from core.deferred import deferred_writer_stop  # noqa: E402
from core.models import Company  # noqa: E402
from core.process_cache import process_caches_forget  # noqa: E402
from core.services import gateway_credential_issue, gateway_credential_revoke  # noqa: E402

CONVERSATION = f"cpu-breakdown-{uuid.uuid4().hex[:8]}"
NEXT_MONDAY = (date.today() + timedelta(days=7 - date.today().weekday())).isoformat()


def tools_call(name: str, arguments: dict, key: str | None = None) -> dict:
    meta = {"com.asixto/conversationId": CONVERSATION}
    if key is not None:
        meta["com.asixto/idempotencyKey"] = key
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


SCENARIOS: dict[str, Callable[[], dict]] = {
    "MCP ping": lambda: {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    "list_services": lambda: tools_call("list_services", {"limit": 20}),
    "find_available_slots": lambda: tools_call(
        "find_available_slots", {"service": "Corte de pelo", "from": NEXT_MONDAY, "limit": 10}
    ),
    "open_case (replay)": lambda: tools_call(
        "open_case", CASE_ARGS, key=f"{CONVERSATION}-replayed"
    ),
    "open_case (first write)": lambda: tools_call("open_case", CASE_ARGS, key=str(uuid.uuid4())),
}
_fresh = iter(range(1, 10**9))


def _identify_fresh() -> dict:
    """A first identify_contact: a fresh conversation and key each call, as in bench/load.py."""
    body = tools_call("identify_contact", {"document": CUSTOMER}, key=str(uuid.uuid4()))
    body["params"]["_meta"]["com.asixto/conversationId"] = f"{CONVERSATION}-{next(_fresh)}"
    return body


PROFILED = {**SCENARIOS, "identify_contact (first write)": _identify_fresh}
PROFILED["MCP ping (auth + envelope, no tool)"] = SCENARIOS["MCP ping"]
LAYERS = (  # the first that a function's file path contains names its layer
    ("/django/db/", "Django ORM"),
    ("/django/", "Django (request, middleware, test client)"),
    ("/ninja/", "django-ninja"),
    ("/pydantic", "pydantic"),
    ("/psycopg", "psycopg (and waiting for PostgreSQL)"),
    ("/kombu/", "kombu / redis (publishing)"),
    ("/redis/", "kombu / redis (publishing)"),
    ("/celery/", "celery"),
    ("/mcp_types/", "mcp_types"),
    (f"{ROOT}/tooling/", "tooling (the tool platform)"),
    (f"{ROOT}/core/", "core (kernel)"),
    (f"{ROOT}/config/", "config"),
    (f"{ROOT}/agenda/", "apps (agenda, support, sales)"),
    (f"{ROOT}/support/", "apps (agenda, support, sales)"),
    (f"{ROOT}/sales/", "apps (agenda, support, sales)"),
)


def _layer(filename: str) -> str:
    for needle, layer in LAYERS:
        if needle in filename:
            return layer
    if filename == "~":
        return "builtins (C functions, socket waits)"
    return "standard library and the rest"


def profile(names: list[str], calls: int) -> None:
    """Each scenario's CPU per call, split by layer (own time) and its top functions."""
    import cProfile
    import pstats

    company = Company.objects.get(slug="sandbox")
    credential, token = gateway_credential_issue(company=company, name="cpu profile")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(body: dict) -> object:
        return client.post(
            "/mcp", body, content_type="application/json", HTTP_MCP_PROTOCOL_VERSION="2025-11-25"
        )

    post(tools_call("identify_contact", {"document": CUSTOMER}, key=str(uuid.uuid4())))
    post(tools_call("open_case", CASE_ARGS, key=f"{CONVERSATION}-replayed"))
    for name in names:
        make = PROFILED.get(name)
        if name == "GET /api/ping":
            call = lambda: client.get("/api/ping")  # noqa: E731
        elif make is not None:
            call = lambda make=make: post(make())  # noqa: E731
        else:
            print(f"\n{name}: no in-process scenario of that name")
            continue
        for _ in range(20):
            call()
        profiler = cProfile.Profile()
        started = time.process_time()
        profiler.enable()
        for _ in range(calls):
            call()
        profiler.disable()
        deferred_writer_stop()
        cpu = (time.process_time() - started) * 1000 / calls
        if os.environ.get("GARANTE_PROFILE_DIR"):  # for pstats: callers, cumulative times
            profiler.dump_stats(Path(os.environ["GARANTE_PROFILE_DIR"]) / f"{name}.prof")
        stats = pstats.Stats(profiler)
        layers: dict[str, float] = {}
        functions = []
        for (filename, line, function), row in stats.stats.items():  # type: ignore[attr-defined]
            own = row[2]
            layers[_layer(filename)] = layers.get(_layer(filename), 0.0) + own
            functions.append((own, f"{Path(filename).name}:{line} {function}"))
        total = sum(layers.values()) or 1.0
        print(
            f"\n{name}: {cpu:.2f} ms of CPU per call in process ({calls} calls, profiled); "
            "shares of the profiled time:"
        )
        for layer, own in sorted(layers.items(), key=lambda item: -item[1]):
            print(f"  {own / total:6.1%}  {layer}")
        print("  top functions by own time:")
        for own, label in sorted(functions, reverse=True)[:8]:
            print(f"  {own / total:6.1%}  {label}")
    gateway_credential_revoke(credential=credential)


VARIANTS = {
    "as shipped": {},
    "process caches off": {"GARANTE_PROCESS_CACHE_SECONDS": 0},
    "... and writes not deferred": {
        "GARANTE_PROCESS_CACHE_SECONDS": 0,
        "GARANTE_DEFERRED_WRITE_SECONDS": 0,
    },
}


def cpu_ms(call: Callable[[], object], calls: int) -> float:
    for _ in range(20):
        call()
    started = time.process_time()
    for _ in range(calls):
        call()
    deferred_writer_stop()  # the queued writes are part of the calls' cost
    return (time.process_time() - started) * 1000 / calls


def main() -> None:
    if "--profile" in sys.argv:
        profile(sys.argv[sys.argv.index("--profile") + 1 :], calls=200)
        return
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    company = Company.objects.get(slug="sandbox")
    credential, token = gateway_credential_issue(company=company, name="cpu breakdown")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(body: dict) -> object:
        response = client.post("/mcp", body, content_type="application/json")
        if response.status_code != 200 or response.json()["result"].get("isError"):
            raise RuntimeError(response.content[:300])
        return response

    post(tools_call("identify_contact", {"document": CUSTOMER}, key=str(uuid.uuid4())))
    rows: dict[str, dict[str, float]] = {}
    shipped = {name: getattr(settings, name) for name in VARIANTS[list(VARIANTS)[-1]]}
    for variant, overrides in VARIANTS.items():
        for name, value in {**shipped, **overrides}.items():
            setattr(settings, name, value)
        process_caches_forget()
        rows[variant] = {
            name: cpu_ms(lambda body=body: post(body()), calls) for name, body in SCENARIOS.items()
        }
    for name, value in shipped.items():
        setattr(settings, name, value)
    ceiling = cpu_ms(lambda: client.get("/api/ping"), calls)
    gateway_credential_revoke(credential=credential)

    print(f"\nWorker CPU per call (ms, {calls} calls each, in process)\n")
    print(f"{'variant':<30}" + "".join(f"{name:>26}" for name in SCENARIOS))
    for variant, values in rows.items():
        print(f"{variant:<30}" + "".join(f"{values[name]:>26.2f}" for name in SCENARIOS))
    print(f"{'GET /api/ping (ceiling)':<30}{ceiling:>26.2f}")


if __name__ == "__main__":
    main()
