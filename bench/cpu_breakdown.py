"""Where the CPU of one MCP tool call goes: worker CPU per call, as it is and with the two
costs that dominate taken out (the bearer-token lookup cached in process, the conversation
trace not written). An experiment, not a change: the patches live only in this process.

Runs in process (Django's test client: the full request cycle without the network) against
the load benchmark's database, so run `bench/load.py` first:

    .venv/bin/python bench/cpu_breakdown.py [calls]
"""

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings")
os.environ.setdefault(
    "DATABASE_URL",
    f"{os.environ.get('GARANTE_BENCH_PG', 'postgres://postgres@127.0.0.1:5432')}/"
    f"{os.environ.get('GARANTE_BENCH_DB', 'garante_bench')}",
)
os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
os.environ.setdefault("GARANTE_LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402

import tooling.auth  # noqa: E402
import tooling.execution  # noqa: E402
from core.models import Company  # noqa: E402
from core.services import gateway_credential_issue, gateway_credential_revoke  # noqa: E402

BODIES = {
    "MCP ping": {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    "list_services": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "list_services",
            "arguments": {"limit": 20},
            "_meta": {"com.asixto/conversationId": "cpu-breakdown"},
        },
    },
}


def cpu_ms(call: Callable[[], object], calls: int) -> float:
    for _ in range(20):
        call()
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) * 1000 / calls


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    company = Company.objects.get(slug="sandbox")
    credential, token = gateway_credential_issue(company=company, name="cpu breakdown")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def posting(body: dict) -> Callable[[], object]:
        return lambda: client.post("/mcp", body, content_type="application/json")

    rows: dict[str, dict[str, float]] = {}
    rows["as it is"] = {name: cpu_ms(posting(body), calls) for name, body in BODIES.items()}
    authenticate = tooling.auth.gateway_company_authenticate
    cache: dict[str, object] = {}

    def cached(value: str) -> object:
        if value not in cache:
            cache[value] = authenticate(value)
        return cache[value]

    tooling.auth.gateway_company_authenticate = cached
    rows["token lookup cached"] = {n: cpu_ms(posting(b), calls) for n, b in BODIES.items()}
    tooling.execution.tool_call_record = lambda **kwargs: None
    rows["... and no trace row"] = {n: cpu_ms(posting(b), calls) for n, b in BODIES.items()}
    ceiling = cpu_ms(lambda: client.get("/api/ping"), calls)
    gateway_credential_revoke(credential=credential)

    print(f"\nWorker CPU per call (ms, {calls} calls each, in process)\n")
    print(f"{'variant':<26}" + "".join(f"{name:>16}" for name in BODIES))
    for variant, values in rows.items():
        print(f"{variant:<26}" + "".join(f"{values[name]:>16.2f}" for name in BODIES))
    print(f"{'GET /api/ping (ceiling)':<26}{ceiling:>16.2f}")


if __name__ == "__main__":
    main()
