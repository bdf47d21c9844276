"""Load benchmark: Garante served as in production, driven over HTTP by wrk, measured against
plain Django on the same server shape and database, in one run.

    make bench                                  # or: .venv/bin/python bench/load.py
    GARANTE_BENCH_QUICK=1 make bench            # 4 s windows; no memory top-up, no growth loads
    GARANTE_BENCH_SCENARIOS=replay,list_services ...   # only these scenarios (and baselines)
    GARANTE_BENCH_OFF="process_cache;h1c_parser" ...  # a Garante per group, those off (A/B)
    GARANTE_BENCH_SECONDS=4 GARANTE_BENCH_ROUNDS=5 ...  # window length, rounds (at least 3)

What it does (docs/performance.md explains the results):
1. A PostgreSQL database of its own (`GARANTE_BENCH_DB`, default `garante_bench`, dropped and
   recreated), migrated and seeded with `seed_sandbox`, plus the baselines' two tables
   (bench/baselines/, 100,000 rows to read); a redis-server of its own as the Celery broker
   (nothing consumes it: publishing is what a request pays); gunicorn serving Garante
   (`config.settings`) and, in the same shape (gthread, 2 workers x 4 threads), the baselines.
2. Rounds (at least 3): in each, every row is measured once by wrk at a fixed concurrency,
   each baseline next to the scenarios it is the yardstick of, the order reversed from one
   round to the next. Rows: the baselines "plain read" (one ORM `.get()` by a unique key,
   returned through a django-ninja schema) and "plain write" (`transaction.atomic()` and one
   ORM `.create()`) and "bare django-ninja" (a GET answered by a django-ninja endpoint with no
   Garante middleware); Garante's `/api/ping` (its middleware, request log line and metrics
   on that same bare endpoint); MCP ping;
   tools/call of list_services, find_available_slots, identify_contact and open_case (first
   writes: a fresh key each request) and open_case replayed under one key; the same trivial
   tool on the official MCP SDK server (bench/sdk_server.py) in three configurations; and,
   with GARANTE_BENCH_OFF, each chosen scenario on a Garante with those mechanisms off
   (bench/variants.py). A ratio is computed within each round and the median reported.
3. SQL statements per tool call, counted in process with CaptureQueriesContext.
4. Gunicorn worker RSS before and after 20,000 further calls (not in quick mode).
5. Growth (not in quick mode): slot search with 1,000 and 1,000,000 appointments in the table,
   replay (key lookup) with 10,000 and up to 10,000,000 idempotency records.
6. For each throughput target missed, a profile of where a call's CPU goes
   (bench/cpu_breakdown.py --profile).
7. Two nodes (bench/cluster_run.py; GARANTE_BENCH_TWO_NODES=0 leaves it out): the chosen
   scenarios among list_services, open_case and MCP ping on deploy/cluster.py's cluster, on one
   node and through nginx on both, with each node's CPU per request (docs/scaling.md).

Prints a table and writes bench-results/load.json and bench-results/load.png (bench/plot.py).
A scenario that needs wrk is skipped, saying so, when wrk is not installed.

This module is the run itself; its parts: bench/config.py (the variables, targets and server
environment), bench/processes.py (servers and what is read off them), bench/database.py (the
bench database and its growth loads), bench/scenarios.py (what is sent, wrk, SQL per call)
and bench/report.py (ratios, verdicts, the table).
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project is not
    sys.path.insert(0, str(ROOT))

from bench import cluster_run  # noqa: E402
from bench.config import (  # noqa: E402
    API_PING,
    APPOINTMENTS_LARGE,
    APPOINTMENTS_SMALL,
    BALANCE_ATTEMPTS,
    BARE_NINJA,
    BENCH_DB,
    CONNECTIONS,
    MCP_PING,
    MEMORY_CALLS,
    MEMORY_TOPUP_SECONDS,
    OFF,
    PG_SERVER,
    PLAIN_READ,
    PLAIN_WRITE,
    PYTHON,
    QUICK,
    RECORDS_BUDGET_SECONDS,
    RECORDS_LARGE,
    RECORDS_SMALL,
    REPLAY,
    RESULTS,
    ROUNDS,
    SECONDS,
    TARGETS,
    THREADS,
    WARMUP_SECONDS,
    WORKERS,
    log,
)
from bench.database import (  # noqa: E402
    fill_appointments,
    fill_idempotency_records,
    key_lookup_ms,
    prepare_database,
    row_count,
    slot_window_ms,
)
from bench.processes import (  # noqa: E402
    CpuMeter,
    Process,
    running,
    start_baselines,
    start_gunicorn,
    start_redis,
    start_sdk_server,
    start_variant,
    worker_rss_kib,
)
from bench.report import evaluate, machine, median, render  # noqa: E402
from bench.scenarios import (  # noqa: E402
    Scenario,
    all_scenarios,
    baselines,
    measure,
    partial_run,
    prepare_conversations,
    queries_per_call,
    scenarios,
    wrk,
)


def rerender() -> int:
    """`bench/load.py --render`: the table and plot again from bench-results/load.json."""
    report = json.loads((RESULTS / "load.json").read_text())
    evaluate(report)
    print(render(report))
    if report.get("two_nodes"):
        print(cluster_run.render(report["two_nodes"], report["scenarios"]))
    from bench.plot import draw

    draw(report, RESULTS / "load.png")
    return 0


def main() -> int:
    if "--render" in sys.argv:
        return rerender()
    have_wrk = shutil.which("wrk") is not None
    if not have_wrk:
        log("wrk is not installed (make bench installs it with apt-get): load scenarios skipped")
    started = time.monotonic()
    RESULTS.mkdir(exist_ok=True)
    report: dict[str, Any] = {
        "machine": machine(),
        "settings": {
            "server": (
                f"gunicorn gthread, {WORKERS} workers x {THREADS} threads, a listening socket "
                "per worker (--reuse-port)"
            ),
            "database": "PostgreSQL (shared server, own database)",
            "broker": "redis-server of its own (no consumer)",
            "concurrency": CONNECTIONS,
            "seconds_per_scenario": SECONDS,
            "rounds": ROUNDS,
            "quick": QUICK,
            "scenarios": [s.name for s in scenarios()],
            "mechanisms_off": OFF,
            "load_generator": "wrk -t1",
        },
        "scenarios": {},
        "sdk": {},
        "variants": {},
        "growth": {},
    }
    with tempfile.TemporaryDirectory(prefix="garante-bench-") as tmp:
        workdir = Path(tmp)
        log(f"preparing database {BENCH_DB} (migrate, seed_sandbox, baselines)")
        token = prepare_database()
        with contextlib.ExitStack() as stack:
            redis = stack.enter_context(running(start_redis(workdir)))
            server = stack.enter_context(running(start_gunicorn(workdir, redis.url)))
            plain = stack.enter_context(running(start_baselines(workdir, redis.url)))
            variants = [
                (group, stack.enter_context(running(start_variant(workdir, redis.url, group))))
                for group in OFF
            ]
            log(f"gunicorn ({WORKERS} gthread workers x {THREADS} threads) at {server.url}")
            prepare_conversations(server.url, token)
            report["queries"] = queries_per_call(token, redis.url)
            log(f"SQL per call: {report['queries']}")
            if have_wrk:
                sdk = [] if partial_run() else start_sdk_servers(workdir, stack)
                run_load(report, server, plain, variants, sdk, token)
            report["server_log_tail"] = server.tail(10)
            chosen = [s.name for s in scenarios() if s.name in cluster_run.SCENARIOS]
            if have_wrk and cluster_run.ENABLED and chosen:
                # After the one-node rows, with their servers idle: the machine's cores are
                # the cluster's (bench/cluster_run.py).
                report["two_nodes"] = cluster_run.two_node_run(redis.url, chosen)
    report["elapsed_seconds"] = round(time.monotonic() - started, 1)
    report["machine"]["load_average_at_end"] = os.getloadavg()
    evaluate(report)
    if have_wrk and not partial_run():
        profile_missed(report)
    (RESULTS / "load.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(render(report))
    if report.get("two_nodes"):
        print(cluster_run.render(report["two_nodes"], report["scenarios"]))
    if have_wrk:
        from bench.plot import draw

        draw(report, RESULTS / "load.png")
        log(f"wrote {RESULTS / 'load.json'} and {RESULTS / 'load.png'}")
    return 0


@dataclass
class Row:
    """One row of the table: a scenario on one server, measured once per round."""

    name: str
    url: str
    scenario: Scenario
    token: str
    cpu: "CpuMeter"
    kind: str  # garante | baseline | variant | sdk
    attempts: int = BALANCE_ATTEMPTS
    runs: list[dict[str, Any]] = field(default_factory=list)


def rounds(rows: list[Row]) -> None:
    """Every row measured once per round, ROUNDS rounds, the order reversed from one round to
    the next: each baseline and the scenarios measured against it are minutes apart at most,
    and a ratio is taken within a round, so load from elsewhere on a shared host moves both
    sides of it. Warmed up once, before the first round."""
    for row in rows:
        wrk(row.url, row.scenario, row.token, seconds=WARMUP_SECONDS)
    for number in range(ROUNDS):
        log(f"round {number + 1} of {ROUNDS}")
        for row in rows if number % 2 == 0 else reversed(rows):
            row.runs.append(
                measure(
                    row.url,
                    row.scenario,
                    row.token,
                    warm_up=False,
                    cpu=row.cpu,
                    attempts=row.attempts,
                    label=row.name,
                )
            )


def summary(row: Row) -> dict[str, Any]:
    """The round whose req/s is the median, with every round's req/s beside it."""
    middle = sorted(row.runs, key=lambda run: run["rps"])[(len(row.runs) - 1) // 2]
    rates = [run["rps"] for run in row.runs]
    return {**middle, "rps": median(rates), "rounds_rps": rates, "kind": row.kind}


SdkServer = tuple[str, Process, str, int]  # name, process, era, balance attempts


def start_sdk_servers(workdir: Path, stack: contextlib.ExitStack) -> list[SdkServer]:
    """The MCP SDK server in its three configurations, all up for the whole run (an idle one
    costs nothing): as shipped, with TCP_NODELAY fixed, and fixed with 2026-07-28 requests."""
    variants = [
        ("SDK server, as shipped", False, "legacy"),
        ("SDK server, TCP_NODELAY fixed", True, "legacy"),
        ("SDK server, TCP_NODELAY fixed, 2026-07-28", True, "modern"),
    ]
    servers = []
    for name, nodelay, era in variants:
        process = stack.enter_context(running(start_sdk_server(workdir, nodelay=nodelay)))
        # As shipped, uvicorn's workers share one socket and one of them accepts every
        # connection: that skew is the configuration being shown, so it is measured once.
        servers.append((name, process, era, BALANCE_ATTEMPTS if nodelay else 1))
    return servers


def run_load(
    report: dict[str, Any],
    server: Process,
    plain: Process,
    variants: list[tuple[list[str], Process]],
    sdk: list[SdkServer],
    token: str,
) -> None:
    url = server.url
    chosen_scenarios = scenarios()
    everything = {s.name: s for s in all_scenarios()}
    slots, replay = everything["find_available_slots"], everything[REPLAY]
    full = not (QUICK or partial_run())

    # Growth, small end: measured before the load fills the tables. The slot search is
    # measured again just before its large load (below): the run adds no appointments, but
    # it grows every table a call writes and ages the workers, and the ratio is to tell what
    # a million appointments cost, not what the run itself did (shown apart, as the drift).
    growth = report["growth"]
    if full:
        fill_appointments(APPOINTMENTS_SMALL)
        fill_idempotency_records(RECORDS_SMALL)
        growth["slots_at_start"] = slot_search_growth_point(url, slots, token)
        growth["replay_small"] = {
            "rows": row_count("core_idempotencyrecord"),
            "sql_lookup_ms": key_lookup_ms(),
        }
        growth["replay_small"].update(measure(url, replay, token, connections=1))

    # The rows, grouped by the baseline they are measured against; a mechanism's "off" row
    # right beside its "on" row, and the SDK server's rows beside our trivial tool.
    ours = CpuMeter(server.popen.pid, database=True)
    theirs = CpuMeter(plain.popen.pid, database=True)
    offs = [
        (f"[off: {','.join(group)}]", process, CpuMeter(process.popen.pid, database=True))
        for group, process in variants
    ]
    groups = {
        PLAIN_READ: ["list_services", "find_available_slots", REPLAY],
        PLAIN_WRITE: ["identify_contact (first write)", "open_case (first write)"],
        BARE_NINJA: [API_PING, MCP_PING],
    }
    names = {s.name for s in chosen_scenarios}
    if MCP_PING in names:
        names.add(API_PING)  # its yardstick
    rows: list[Row] = []
    for baseline, members in groups.items():
        members = [name for name in members if name in names]
        if not members:
            continue
        rows.append(Row(baseline, plain.url, baselines()[baseline], "", theirs, "baseline"))
        for name in members:
            rows.append(Row(name, url, everything[name], token, ours, "garante"))
            for tag, process, meter in offs:
                rows.append(
                    Row(f"{name} {tag}", process.url, everything[name], token, meter, "variant")
                )
            if name == "list_services":
                for sdk_name, process, era, attempts in sdk:
                    scenario = Scenario(
                        sdk_name, tool="list_services", arguments={"limit": 20}, era=era
                    )
                    meter = CpuMeter(process.popen.pid, database=False)
                    rows.append(Row(sdk_name, process.url, scenario, "", meter, "sdk", attempts))

    master = server.popen.pid
    before = worker_rss_kib(master)
    rounds(rows)
    report["rows"] = [row.name for row in rows]
    report["round_rps"] = {row.name: [run["rps"] for run in row.runs] for row in rows}
    for row in rows:
        bucket = {"sdk": "sdk", "variant": "variants"}.get(row.kind, "scenarios")
        report[bucket][row.name] = summary(row)

    if QUICK or partial_run():
        return
    calls = sum(
        run["answered"]
        for row in rows
        if row.kind == "garante" and "ping" not in row.name
        for run in row.runs
    )
    trivial = everything["list_services"]
    if calls < MEMORY_CALLS:
        topped = wrk(
            url, trivial, token, seconds=MEMORY_TOPUP_SECONDS, stop_after=MEMORY_CALLS - calls
        )
        calls += topped["answered"]
    after = worker_rss_kib(master)
    report["memory"] = {
        "calls": calls,
        "workers": len(before),
        "rss_before_kib": sum(before.values()),
        "rss_after_kib": sum(after.values()),
        "per_worker_before_kib": list(before.values()),
        "per_worker_after_kib": list(after.values()),
        "same_workers": sorted(before) == sorted(after),
    }
    log(f"RSS {sum(before.values())} KiB -> {sum(after.values())} KiB over {calls} tool calls")

    # Growth, large end: the slot search at 1,000 appointments again, then at 1,000,000.
    growth["slots_small"] = slot_search_growth_point(url, slots, token)
    seconds = fill_appointments(APPOINTMENTS_LARGE)
    growth["slots_large"] = slot_search_growth_point(url, slots, token, load_seconds=seconds)
    seconds = fill_idempotency_records(RECORDS_LARGE, RECORDS_BUDGET_SECONDS)
    growth["replay_large"] = {
        "rows": row_count("core_idempotencyrecord"),
        "load_seconds": seconds,
        "sql_lookup_ms": key_lookup_ms(),
    }
    growth["replay_large"].update(measure(url, replay, token, connections=1))
    if growth["replay_large"]["rows"] < RECORDS_LARGE:
        log(
            f"idempotency records: reached {growth['replay_large']['rows']:,} rows within the "
            f"{RECORDS_BUDGET_SECONDS:g} s load budget (target size {RECORDS_LARGE:,})"
        )


def slot_search_growth_point(
    url: str, slots: Scenario, token: str, **facts: float
) -> dict[str, Any]:
    point = {"rows": row_count("agenda_appointment"), **facts, "sql_lookup_ms": slot_window_ms()}
    point.update(measure(url, slots, token, connections=1))
    return point


def profile_missed(report: dict[str, Any]) -> None:
    """Where the CPU of a call goes, for each scenario that missed its throughput target
    (bench/cpu_breakdown.py --profile, in process against the bench database)."""
    missed = [
        name
        for name, verdict in report["verdicts"].items()
        if verdict.get("met") is False and name in TARGETS
    ]
    if not missed:
        return
    log(f"profiling the scenarios that missed their targets: {missed}")
    # As shipped, the request log line on (its lines go to the discarded stderr): what it
    # costs is part of a missed target's profile.
    env = dict(
        os.environ, GARANTE_BENCH_DB=BENCH_DB, GARANTE_BENCH_PG=PG_SERVER, GARANTE_LOG_LEVEL="INFO"
    )
    done = subprocess.run(
        [PYTHON, "bench/cpu_breakdown.py", "--profile", *missed],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report["profiles"] = done.stdout if done.returncode == 0 else done.stdout + done.stderr
    if API_PING in missed:
        # The ping's cProfile shares say only "Django": its middleware, one group at a time.
        layers = subprocess.run(
            [PYTHON, "bench/middleware_cost.py"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        report["profiles"] += layers.stdout if layers.returncode == 0 else layers.stderr[-2000:]


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds the context managers: servers are stopped


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    sys.exit(main())
