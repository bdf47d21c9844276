"""Where the CPU of one MCP tool call goes: worker CPU per call in process, with the process
caches and the deferred bookkeeping writes on (as shipped) and switched off one after the
other (as before issue #11's round), next to the ceiling (a bare django-ninja endpoint).

Runs in process (Django's test client: the full request cycle without the network) against
the load benchmark's database, so run `bench/load.py` first:

    .venv/bin/python bench/cpu_breakdown.py [calls]

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
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault(
    "DATABASE_URL",
    f"{os.environ.get('GARANTE_BENCH_PG', 'postgres://postgres@127.0.0.1:5432')}/"
    f"{os.environ.get('GARANTE_BENCH_DB', 'garante_bench')}",
)
os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
os.environ.setdefault("GARANTE_LOG_LEVEL", "WARNING")

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

from bench.load import start_redis  # noqa: E402

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

CUSTOMER = "12345678Z"  # Ana, a sandbox contact
CONVERSATION = f"cpu-breakdown-{uuid.uuid4().hex[:8]}"
CASE = {"identifier": CUSTOMER, "subject": "No funciona", "description": "Prueba."}
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
    "open_case (replay)": lambda: tools_call("open_case", CASE, key=f"{CONVERSATION}-replayed"),
    "open_case (first write)": lambda: tools_call("open_case", CASE, key=str(uuid.uuid4())),
}
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
