"""What the load benchmark sends: the scenarios, wrk runs around them, the SQL of one call."""

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.config import (
    API_PING,
    BALANCE_ATTEMPTS,
    BALANCED_SHARE,
    BARE_NINJA,
    CASE_ARGS,
    CASE_CONVERSATIONS,
    CONNECTIONS,
    CUSTOMER,
    MCP_PING,
    OFF,
    ONLY,
    PLAIN_ITEMS,
    PLAIN_READ,
    PLAIN_WRITE,
    REPLAY,
    SECONDS,
    WARMUP_SECONDS,
    WRK_SCRIPT,
    environment,
    log,
    next_monday,
)
from bench.processes import CpuMeter, tcp_accepted
from bench.variants import MECHANISMS


@dataclass
class Scenario:
    name: str
    path: str = "/mcp"
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    key: str = "none"  # none | fresh | a fixed key
    conversation: str = "bench-reader"
    era: str = "legacy"
    method: str = "POST"
    token: bool = True
    body: str = ""  # sent as is when there is no tool
    short: str = ""  # its name in GARANTE_BENCH_SCENARIOS
    plain: str = ""  # a baseline's wrk mode (bench/wrk/mcp.lua BENCH_PLAIN)

    def wrk_env(self, token: str, run_id: str) -> dict[str, str]:
        return {
            "BENCH_METHOD": self.method,
            "BENCH_TOKEN": token if self.token else "",
            "BENCH_TOOL": self.tool,
            "BENCH_ARGS": json.dumps(self.arguments, ensure_ascii=False),
            "BENCH_KEY": self.key,
            "BENCH_CONV": self.conversation,
            "BENCH_ERA": self.era,
            "BENCH_RUN": run_id,
            "BENCH_BODY": self.body,
            "BENCH_PLAIN": self.plain,
        }


_runs = iter(range(1, 1_000_000))


def wrk(
    base_url: str,
    scenario: Scenario,
    token: str,
    *,
    seconds: float,
    connections: int = CONNECTIONS,
    stop_after: int = 0,
) -> dict[str, Any]:
    run_id = f"{os.getpid()}x{next(_runs)}"
    env = dict(os.environ, **scenario.wrk_env(token, run_id))
    env["BENCH_STOP_AFTER"] = str(stop_after)
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s"]
    command += ["-s", str(WRK_SCRIPT), f"{base_url}{scenario.path}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds + 120)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    if done.stderr.strip():
        result["sample_failures"] = done.stderr.strip().splitlines()[:3]
    return result


def measure(
    base_url: str,
    scenario: Scenario,
    token: str,
    *,
    warm_up: bool = True,
    cpu: CpuMeter | None = None,
    attempts: int = BALANCE_ATTEMPTS,
    label: str = "",
    **options: Any,
) -> dict[str, Any]:
    label = label or scenario.name
    if warm_up:
        wrk(base_url, scenario, token, seconds=WARMUP_SECONDS, **options)
    connections = options.get("connections", CONNECTIONS)
    for attempt in range(1, attempts + 1):
        before = cpu.read() if cpu else None
        accepted = tcp_accepted()
        result = wrk(base_url, scenario, token, seconds=SECONDS, **options)
        # wrk opens its connections once; any more are reconnections after the server closed
        # a kept-alive one.
        result["reconnections"] = max(tcp_accepted() - accepted - connections, 0)
        result["concurrency"] = connections
        result["attempts"] = attempt
        if not (cpu and before and result["requests"]):
            break
        after = cpu.read()
        per_request = 1000 / result["requests"]
        result["server_cpu_ms"] = round(CpuMeter.spent(before[0], after[0]) * per_request, 3)
        result["postgres_cpu_ms"] = round(CpuMeter.spent(before[1], after[1]) * per_request, 3)
        # wrk's connections are kept alive, so whichever worker accepted each one serves all
        # of its requests: when most land on one worker, the run measures one core, not two.
        shares = [value - before[0].get(pid, 0.0) for pid, value in after[0].items()]
        if len(shares) < 2 or connections < 2 * len(shares) or sum(shares) <= 0:
            break
        result["busiest_worker_share"] = round(max(shares) / sum(shares), 2)
        if result["busiest_worker_share"] <= BALANCED_SHARE or attempt == attempts:
            break
        log(
            f"{label:<44} {result['rps']:>8.0f} req/s with one worker doing "
            f"{result['busiest_worker_share']:.0%} of the work: measured again"
        )
    failed = result["failed"] + result["socket_errors"] + result["timeouts"]
    log(
        f"{label:<44} {result['rps']:>8.0f} req/s  p50 {result['p50_ms']:6.1f} ms  "
        f"p99 {result['p99_ms']:6.1f} ms" + (f"  ({failed} FAILED)" if failed else "")
    )
    return result


# --- the scenarios -----------------------------------------------------------------------


def baselines() -> dict[str, Scenario]:
    """The plain Django rows (bench/baselines/), served by their own gunicorn."""
    return {
        PLAIN_READ: Scenario(
            PLAIN_READ, path="/plain/read", method="GET", token=False, plain=f"read:{PLAIN_ITEMS}"
        ),
        PLAIN_WRITE: Scenario(PLAIN_WRITE, path="/plain/write", token=False, plain="write"),
        BARE_NINJA: Scenario(BARE_NINJA, path="/plain/ping", method="GET", token=False),
    }


def all_scenarios() -> list[Scenario]:
    slots_args = {"service": "Corte de pelo", "from": next_monday(), "limit": 10}
    return [
        Scenario(API_PING, path="/api/ping", method="GET", token=False, short="api_ping"),
        Scenario(MCP_PING, body='{"jsonrpc":"2.0","id":1,"method":"ping"}', short="mcp_ping"),
        Scenario(
            "list_services", tool="list_services", arguments={"limit": 20}, short="list_services"
        ),
        Scenario(
            "find_available_slots",
            tool="find_available_slots",
            arguments=slots_args,
            short="find_available_slots",
        ),
        Scenario(
            "identify_contact (first write)",
            tool="identify_contact",
            arguments={"document": CUSTOMER},
            key="fresh",
            conversation="fresh",
            short="identify_contact",
        ),
        Scenario(
            "open_case (first write)",
            tool="open_case",
            arguments=CASE_ARGS,
            key="fresh",
            conversation=f"pool:{CASE_CONVERSATIONS}",
            short="open_case",
        ),
        Scenario(
            REPLAY,
            tool="open_case",
            arguments=CASE_ARGS,
            key="bench-replayed-key",
            conversation="bench-pool-0",
            short="replay",
        ),
    ]


def scenarios() -> list[Scenario]:
    """The scenarios of this run: GARANTE_BENCH_SCENARIOS's (short names or full names), or,
    with GARANTE_BENCH_OFF alone, those the mechanisms off are for; else all."""
    everything = all_scenarios()
    wanted = set(ONLY)
    if not wanted and OFF:
        wanted = {name for group in OFF for off in group for name in MECHANISMS[off].scenarios}
    if not wanted:
        return everything
    known = {s.short for s in everything} | {s.name for s in everything}
    unknown = wanted - known
    if unknown:
        raise SystemExit(
            f"GARANTE_BENCH_SCENARIOS: unknown {sorted(unknown)}; known: "
            f"{sorted(s.short for s in everything)}"
        )
    return [s for s in everything if s.short in wanted or s.name in wanted]


def partial_run() -> bool:
    """A run of chosen scenarios or of mechanisms off: no memory, growth or SDK rows."""
    return bool(ONLY or OFF)


def mcp_call(base_url: str, token: str, tool: str, arguments: dict, meta: dict) -> dict:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
    answer = httpx.post(f"{base_url}/mcp", json=body, headers=headers, timeout=30).json()
    result = answer.get("result") or {}
    if result.get("isError") is not False:
        raise RuntimeError(f"{tool} failed while preparing the bench: {answer}")
    return result["structuredContent"]


def prepare_conversations(base_url: str, token: str) -> None:
    """Identify the pool of conversations that open cases; prime the replayed key."""
    for n in range(CASE_CONVERSATIONS):
        conversation = f"bench-pool-{n}"
        meta = {"com.asixto/conversationId": conversation, "com.asixto/idempotencyKey": f"id-{n}"}
        mcp_call(base_url, token, "identify_contact", {"document": CUSTOMER}, meta)
    meta = {
        "com.asixto/conversationId": "bench-pool-0",
        "com.asixto/idempotencyKey": "bench-replayed-key",
    }
    mcp_call(base_url, token, "open_case", CASE_ARGS, meta)


# The transaction's brackets, which the plain write pays too, are not counted: "SQL per call" is
# the statements doing the call's work, comparable with the plain write's one INSERT.
BRACKETS = ("BEGIN", "COMMIT")


def statements(captured: Any) -> int:
    return sum(1 for query in captured.captured_queries if query["sql"] not in BRACKETS)


def queries_per_call(token: str, broker_url: str) -> dict[str, int]:
    """SQL statements of one call of each scenario, besides BEGIN and COMMIT, counted in process
    (deterministic). What the calls publish goes to the benchmark's own Redis, as the server's
    does."""
    import django

    os.environ.update(environment(GARANTE_LOG_LEVEL="WARNING", CELERY_BROKER_URL=broker_url))
    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    counts: dict[str, int] = {}
    for n, scenario in enumerate(scenarios()):
        if scenario.body:
            # Warm first, as every measured call below: per-process caches (the token) filled.
            client.post(scenario.path, scenario.body, content_type="application/json")
            with CaptureQueriesContext(connection) as captured:
                client.post(scenario.path, scenario.body, content_type="application/json")
            counts[scenario.name] = statements(captured)
            continue
        if scenario.path != "/mcp":
            with CaptureQueriesContext(connection) as captured:
                client.get(scenario.path)
            counts[scenario.name] = statements(captured)
            continue
        meta = {"com.asixto/conversationId": scenario.conversation}
        if scenario.conversation == "fresh":
            meta["com.asixto/conversationId"] = f"bench-queries-{os.getpid()}-{n}"
        elif scenario.conversation.startswith("pool:"):
            meta["com.asixto/conversationId"] = "bench-pool-1"
        if scenario.key == "fresh":
            meta["com.asixto/idempotencyKey"] = f"bench-queries-{os.getpid()}-{n}"
        elif scenario.key != "none":
            meta["com.asixto/idempotencyKey"] = scenario.key
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "tools/call",
            "params": {"name": scenario.tool, "arguments": scenario.arguments, "_meta": meta},
        }
        send = lambda body=body: client.post(  # noqa: E731
            "/mcp",
            body,
            content_type="application/json",
            HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
        )
        send()  # a first call may fill per-process caches (and creates the conversation)
        if scenario.key == "fresh":
            meta["com.asixto/idempotencyKey"] += "-measured"
        if scenario.conversation == "fresh":
            meta["com.asixto/conversationId"] += "-measured"
        with CaptureQueriesContext(connection) as captured:
            response = send()
        assert response.json()["result"]["isError"] is False, response.content
        counts[scenario.name] = statements(captured)
    connection.close()
    return counts
