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
   ORM `.create()`); the bare django-ninja `/api/ping` (the framework's ceiling); MCP ping;
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

Prints a table and writes bench-results/load.json and bench-results/load.png (bench/plot.py).
A scenario that needs wrk is skipped, saying so, when wrk is not installed.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is on the path, the project is not
    sys.path.insert(0, str(ROOT))

from bench.variants import MECHANISMS, chosen  # noqa: E402

RESULTS = ROOT / "bench-results"
WRK_SCRIPT = ROOT / "bench" / "wrk" / "mcp.lua"
PYTHON = sys.executable

BENCH_DB = os.environ.get("GARANTE_BENCH_DB", "garante_bench")
PG_SERVER = os.environ.get("GARANTE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DATABASE_URL = f"{PG_SERVER}/{BENCH_DB}"
QUICK = os.environ.get("GARANTE_BENCH_QUICK", "") not in ("", "0")
SECONDS = float(os.environ.get("GARANTE_BENCH_SECONDS", "4" if QUICK else "8"))
ROUNDS = max(3, int(os.environ.get("GARANTE_BENCH_ROUNDS", "3")))
ONLY = [name.strip() for name in os.environ.get("GARANTE_BENCH_SCENARIOS", "").split(",")]
ONLY = [name for name in ONLY if name]
# Variants of Garante, each with some mechanisms off: "a,b;c" serves one with a and b off and
# one with c off.
OFF = [chosen(group) for group in os.environ.get("GARANTE_BENCH_OFF", "").split(";")]
OFF = [group for group in OFF if group]
WARMUP_SECONDS = 2
CONNECTIONS = int(os.environ.get("GARANTE_BENCH_CONNECTIONS", "16"))
WORKERS = int(os.environ.get("GARANTE_BENCH_WORKERS", "2"))
THREADS = int(os.environ.get("GARANTE_BENCH_THREADS", "4"))
MEMORY_CALLS = 20_000
MEMORY_TOPUP_SECONDS = float(os.environ.get("GARANTE_BENCH_TOPUP_SECONDS", "150"))
# Growth sizes (rows in the table); the large idempotency load stops at its time budget.
APPOINTMENTS_SMALL, APPOINTMENTS_LARGE = 1_000, 1_000_000
RECORDS_SMALL, RECORDS_LARGE = 10_000, 10_000_000
RECORDS_BATCH = 1_000_000
RECORDS_BUDGET_SECONDS = float(os.environ.get("GARANTE_BENCH_LOAD_BUDGET", "300"))
PLAIN_ITEMS = 100_000  # rows of the plain read's table

PLAIN_READ, PLAIN_WRITE = "baseline: plain read", "baseline: plain write"
CEILING = "ceiling: GET /api/ping"
MCP_PING = "MCP ping (auth + envelope, no tool)"
REPLAY = "open_case (replay)"
# The ratio each scenario must reach to the row it is measured against (issue 29).
TARGETS = {
    REPLAY: (PLAIN_READ, 1.5),
    "list_services": (PLAIN_READ, 1.2),
    "find_available_slots": (PLAIN_READ, 0.6),
    "identify_contact (first write)": (PLAIN_WRITE, 0.8),
    "open_case (first write)": (PLAIN_WRITE, 0.8),
    MCP_PING: (CEILING, 0.95),
}
SDK_TARGET = 1.0  # list_services over the MCP SDK server's fastest configuration
SQL_BUDGETS = {  # SQL statements per call, at most
    REPLAY: 1,
    "list_services": 3,
    "find_available_slots": 3,
    "identify_contact (first write)": 6,
    "open_case (first write)": 6,
}
# A run in which one worker did more than this share of the workers' CPU is measured again
# (at most BALANCE_ATTEMPTS runs in all): see measure().
BALANCED_SHARE = 0.65
BALANCE_ATTEMPTS = 3
GROWTH_TARGET = 1.5
RSS_TARGET = 0.10

CUSTOMER = "12345678Z"  # Ana, a sandbox contact (core/management/commands/seed_sandbox.py)
CASE_ARGS = {"identifier": CUSTOMER, "subject": "No funciona", "description": "Prueba de carga."}
CASE_CONVERSATIONS = 64  # a pool of identified conversations opening cases


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": DATABASE_URL,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
            "GARANTE_SMS_BACKEND": "console",
            "PYTHONPATH": str(ROOT),
        }
    )
    env.update(extra)
    return env


# --- processes ---------------------------------------------------------------------------


@dataclass
class Process:
    popen: subprocess.Popen
    url: str
    log_path: Path

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def spawn(command: list[str], *, env: dict[str, str], log_path: Path, url: str) -> Process:
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
    return Process(popen, url, log_path)


def wait_until(process: Process, probe: str, *, body: dict | None = None, timeout: float = 60):
    """Until `probe` answers (a GET, or a POST of `body`); the process must not exit first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise RuntimeError(f"{probe} exited early:\n{process.tail()}")
        try:
            if body is None:
                httpx.get(probe, timeout=2)
            else:
                headers = {"Accept": "application/json, text/event-stream"}
                httpx.post(probe, json=body, headers=headers, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    process.stop()
    raise RuntimeError(f"{probe} did not answer in {timeout} s:\n{process.tail()}")


def start_redis(workdir: Path) -> Process:
    port = free_port()
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    command += ["--appendonly", "no", "--dir", str(workdir)]
    process = spawn(
        command,
        env=dict(os.environ),
        log_path=workdir / "redis.log",
        url=f"redis://127.0.0.1:{port}/0",
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"redis-server did not start:\n{process.tail()}")


def start_gunicorn(
    workdir: Path,
    broker_url: str,
    *,
    app: str = "config.wsgi:application",
    name: str = "garante",
    env: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    add: tuple[str, ...] = (),
) -> Process:
    """gunicorn in the bench's shape (gthread, WORKERS x THREADS) serving `app`: Garante as
    shipped, the baselines, or Garante with mechanisms off (`drop`/`add`: arguments taken
    out or put in, for the mechanisms that are gunicorn's)."""
    port = free_port()
    command = [PYTHON, "-m", "gunicorn", app, "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", str(WORKERS), "--threads", str(THREADS), "--worker-class", "gthread"]
    # Each worker listens on a socket of its own (SO_REUSEPORT) and the kernel spreads new
    # connections over them. On one shared socket, whichever worker woke first accepted all of
    # wrk's kept-alive connections as wrk opened them at once, and served the whole run: one
    # core measured, not two.
    command += ["--reuse-port"]
    command += ["--keep-alive", "30", "--backlog", "2048", "--log-level", "warning"]
    command = [arg for arg in command if arg not in drop] + list(add)
    process = spawn(
        command,
        env=environment(CELERY_BROKER_URL=broker_url, **(env or {})),
        log_path=workdir / f"gunicorn-{name}.log",
        url=f"http://127.0.0.1:{port}",
    )
    probe = "/plain/ping" if app.startswith("bench.baselines") else "/api/ping"
    wait_until(process, f"{process.url}{probe}")
    return process


def start_baselines(workdir: Path, broker_url: str) -> Process:
    return start_gunicorn(
        workdir,
        broker_url,
        app="bench.baselines.wsgi:application",
        name="baselines",
        env={"DJANGO_SETTINGS_MODULE": "bench.baselines.settings"},
    )


def start_variant(workdir: Path, broker_url: str, off: list[str]) -> Process:
    """Garante with the mechanisms `off` turned off (bench/variants.py)."""
    env = {"DJANGO_SETTINGS_MODULE": "bench.variant_settings", "GARANTE_BENCH_OFF": ",".join(off)}
    drop: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    for name in off:
        env.update(MECHANISMS[name].env)
        drop += MECHANISMS[name].gunicorn_drop
        add += MECHANISMS[name].gunicorn_add
    return start_gunicorn(
        workdir,
        broker_url,
        app="bench.variant_wsgi:application",
        name="variant-" + "-".join(off),
        env=env,
        drop=drop,
        add=add,
    )


def start_sdk_server(workdir: Path, *, nodelay: bool) -> Process:
    """As shipped: uvicorn's workers on one socket, h11 on asyncio. Fixed: TCP_NODELAY set,
    each worker on a socket of its own as ours are (gunicorn's --reuse-port), and uvicorn's C
    parser on uvloop as ours parse with gunicorn's (bench/sdk_server.py)."""
    port = free_port()
    command = [PYTHON, "bench/sdk_server.py", "--port", str(port), "--workers", str(WORKERS)]
    if nodelay:
        command += ["--nodelay", "--reuse-port", "--fast"]
    process = spawn(
        command,
        env=environment(),
        log_path=workdir / f"sdk-{port}.log",
        url=f"http://127.0.0.1:{port}",
    )
    # A GET would open the SDK's event stream; a ping answers at once.
    wait_until(process, f"{process.url}/mcp", body={"jsonrpc": "2.0", "id": 0, "method": "ping"})
    return process


def worker_rss_kib(master_pid: int) -> dict[int, int]:
    """Resident memory (KiB) of each gunicorn worker: the master's children."""
    rss = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(master_pid):
            rss[int(fields["Pid"])] = int(fields.get("VmRSS", "0 kB").split()[0])
    return rss


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU time of each process (from /proc/<pid>/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    times = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        times[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return times


def tcp_accepted() -> int:
    """TCP connections this machine's servers have accepted since boot (PassiveOpens)."""
    lines = Path("/proc/net/snmp").read_text().splitlines()
    names, values = (line.split() for line in lines if line.startswith("Tcp:"))
    return int(dict(zip(names, values, strict=True))["PassiveOpens"])


def postgres_backends() -> list[int]:
    """The server processes serving the bench database's connections."""
    pids = psql(
        f"SELECT pid FROM pg_stat_activity WHERE datname = '{BENCH_DB}' AND pid <> pg_backend_pid()"
    )
    return [int(pid) for pid in pids.split()]


class CpuMeter:
    """CPU seconds spent by the server's workers and by PostgreSQL during one run: what a
    request costs, whatever else the machine is doing at the same time."""

    def __init__(self, master_pid: int, database: bool) -> None:
        self.master_pid = master_pid
        self.database = database

    def read(self) -> tuple[dict[int, float], dict[int, float]]:
        workers = cpu_seconds(list(worker_rss_kib(self.master_pid)))
        backends = cpu_seconds(postgres_backends()) if self.database else {}
        return workers, backends

    @staticmethod
    def spent(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(value - before.get(pid, 0.0) for pid, value in after.items())


# --- the database ------------------------------------------------------------------------


def psql(sql: str, database: str = BENCH_DB) -> str:
    done = subprocess.run(
        ["psql", f"{PG_SERVER}/{database}", "-v", "ON_ERROR_STOP=1", "-Atq", "-c", sql],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def prepare_database() -> str:
    """A fresh, migrated, seeded bench database with the baselines' tables; returns the
    sandbox's gateway token."""
    psql(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)', database="postgres")
    psql(f'CREATE DATABASE "{BENCH_DB}"', database="postgres")
    env = environment(GARANTE_LOG_LEVEL="WARNING")
    manage = [PYTHON, "manage.py"]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    seeded = subprocess.run(
        [*manage, "seed_sandbox"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    match = re.search(r"Gateway token:\s*(\S+)", seeded.stdout)
    if match is None:
        raise RuntimeError(f"seed_sandbox printed no token:\n{seeded.stdout}")
    plain = dict(env, DJANGO_SETTINGS_MODULE="bench.baselines.settings")
    subprocess.run(
        [*manage, "migrate", "--run-syncdb", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=plain,
        check=True,
    )
    psql(
        f"""
        INSERT INTO baselines_item (key, name, price_cents, created_at)
        SELECT 'item-' || g, 'Artículo ' || g, g % 10000, now() - g * interval '1 minute'
        FROM generate_series(0, {PLAIN_ITEMS - 1}) AS g
        """
    )
    settle("baselines_item")
    return match.group(1)


# Bulk loads generate consistent rows, so this session skips the per-row foreign-key triggers
# (4 lookups per appointment) that would dominate the load time; indexes are maintained as usual.
BULK_SESSION = "SET session_replication_role = replica;"


def row_count(table: str) -> int:
    return int(psql(f"SELECT count(*) FROM {table}"))


def fill_appointments(total: int) -> float:
    """Bring agenda_appointment to `total` rows of past, attended history (seconds taken).

    Spread over the sandbox's professionals, one every 15 minutes going back from a year ago,
    so the searched weeks stay as they were and the exclusion constraint (scheduled rows
    only) is not involved: what grows is the table and its indexes.
    """
    missing = total - row_count("agenda_appointment")
    if missing <= 0:
        return 0.0
    started = time.monotonic()
    psql(
        f"""
        {BULK_SESSION}
        WITH p AS (
            SELECT pr.id, pr.company_id, row_number() OVER (ORDER BY pr.id) - 1 AS i,
                   count(*) OVER () AS n
            FROM agenda_professional pr
            JOIN core_company c ON c.id = pr.company_id AND c.slug = 'sandbox'
        ),
        s AS (SELECT id FROM agenda_service ORDER BY id LIMIT 1),
        k AS (SELECT id FROM core_contact ORDER BY id LIMIT 1),
        base AS (SELECT coalesce(max(id), 0) AS b FROM agenda_appointment)
        INSERT INTO agenda_appointment (company_id, reference, contact_id, service_id,
            professional_id, starts_at, ends_at, blocked_from, blocked_until, state,
            created_via, created_at, updated_at)
        SELECT p.company_id, 'AP-B' || (base.b + g), k.id, s.id, p.id,
               t, t + interval '30 minutes', t, t + interval '40 minutes', 'attended',
               'staff', t, t
        FROM generate_series(1, {missing}) AS g
        CROSS JOIN base CROSS JOIN s CROSS JOIN k
        JOIN p ON p.i = g % p.n
        CROSS JOIN LATERAL (SELECT now() - interval '365 days'
                            - (g / p.n) * interval '15 minutes' AS t) AS at;
        """
    )
    settle("agenda_appointment")
    return time.monotonic() - started


def settle(table: str) -> None:
    """After a bulk load: vacuumed now, so autovacuum does not wake up on the new rows during
    the measurement, and a checkpoint, so no write-out of the load's pages overlaps it."""
    psql(f"VACUUM ANALYZE {table}")
    psql("CHECKPOINT")


def fill_idempotency_records(total: int, budget_seconds: float | None = None) -> float:
    """Bring tooling_idempotencyrecord towards `total` rows, in batches (seconds taken).

    Keys look like the Gateway's (hex digests), spread over the whole index. A large load
    (more than one batch) drops the table's secondary indexes and unique constraint first and
    builds them again at the end, as a bulk load should: inserting random keys into a live
    B-tree is what made 10,000,000 rows take many minutes. With a budget, stops after the
    batch that exhausts it: the caller reports the size actually reached.
    """
    started = time.monotonic()
    table = "tooling_idempotencyrecord"
    rebuild: list[str] = []
    if total - row_count(table) > RECORDS_BATCH:
        rebuild = psql(
            f"""
            SELECT 'ALTER TABLE {table} ADD CONSTRAINT ' || quote_ident(conname) || ' '
                   || pg_get_constraintdef(oid) || ';'
            FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'u'
            UNION ALL
            SELECT indexdef || ';' FROM pg_indexes
            WHERE tablename = '{table}' AND indexname NOT IN (
                SELECT conname FROM pg_constraint
                WHERE conrelid = '{table}'::regclass AND contype IN ('p', 'u'))
            """
        ).splitlines()
        drops = psql(
            f"""
            SELECT format('ALTER TABLE {table} DROP CONSTRAINT %I;', conname)
            FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'u'
            UNION ALL
            SELECT format('DROP INDEX %I;', indexname) FROM pg_indexes
            WHERE tablename = '{table}' AND indexname NOT IN (
                SELECT conname FROM pg_constraint
                WHERE conrelid = '{table}'::regclass AND contype IN ('p', 'u'))
            """
        ).splitlines()
        psql("".join(drops))
    while (have := row_count(table)) < total:
        batch = min(RECORDS_BATCH, total - have)
        psql(
            f"""
            {BULK_SESSION}
            INSERT INTO {table} (company_id, key, operation, fingerprint,
                response, status_code, created_at, replay_until, expires_at, replay_count)
            SELECT c.id, md5('bulk-' || ({have} + g)), 'open_case', md5(g::text) || md5('f'),
                   '{{"reference":"CS-BULK00","state":"open"}}', 200, now(),
                   now() + interval '7 days', now() + interval '37 days', 0
            FROM generate_series(1, {batch}) AS g
            CROSS JOIN (SELECT id FROM core_company WHERE slug = 'sandbox') AS c
            """
        )
        if budget_seconds is not None and time.monotonic() - started > budget_seconds:
            break
    if rebuild:
        psql("SET maintenance_work_mem = '1GB';" + "".join(rebuild))
    settle(table)
    return time.monotonic() - started


def key_lookup_ms(samples: int = 40) -> float:
    """Median server-side execution time of the engine's key lookup (EXPLAIN ANALYZE of the
    indexed (company, key) probe, random keys): the database's share of a replay, free of
    HTTP and of the machine's other load."""
    statements = "".join(
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM tooling_idempotencyrecord "
        f"WHERE company_id = (SELECT id FROM core_company WHERE slug = 'sandbox') "
        f"AND key = md5('bulk-' || {n * 7919 % 10_000 + 1});"
        for n in range(samples)
    )
    plans = json.loads("[" + psql(statements).replace("\n]\n[", "],[") + "]")
    times = sorted(plan[0]["Execution Time"] for plan in plans)
    return round(times[len(times) // 2], 4)


def slot_window_ms(samples: int = 20) -> float:
    """Median server-side execution time of the slot search's appointment query (the
    both-sides-bounded range scan of agenda.availability.scheduled_in_window) over the two
    weeks the benchmark searches: the database's share of the search that grows with the
    table."""
    ids = psql(
        "SELECT string_agg(p.id::text, ',') FROM agenda_professional p "
        "JOIN core_company c ON c.id = p.company_id AND c.slug = 'sandbox'"
    )
    start = f"'{next_monday()}'::timestamptz"
    statement = (
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM agenda_appointment "
        f"WHERE professional_id IN ({ids}) AND state = 'scheduled' "
        f"AND blocked_from >= {start} - interval '20 hours' "
        f"AND blocked_from < {start} + interval '14 days' AND blocked_until > {start};"
    )
    plans = json.loads("[" + psql(statement * samples).replace("\n]\n[", "],[") + "]")
    times = sorted(plan[0]["Execution Time"] for plan in plans)
    return round(times[len(times) // 2], 4)


# --- load generation ---------------------------------------------------------------------


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


def next_monday() -> str:
    today = date.today()
    return (today + timedelta(days=7 - today.weekday())).isoformat()


def baselines() -> dict[str, Scenario]:
    """The plain Django rows (bench/baselines/), served by their own gunicorn."""
    return {
        PLAIN_READ: Scenario(
            PLAIN_READ, path="/plain/read", method="GET", token=False, plain=f"read:{PLAIN_ITEMS}"
        ),
        PLAIN_WRITE: Scenario(PLAIN_WRITE, path="/plain/write", token=False, plain="write"),
    }


def all_scenarios() -> list[Scenario]:
    slots_args = {"service": "Corte de pelo", "from": next_monday(), "limit": 10}
    return [
        Scenario(CEILING, path="/api/ping", method="GET", token=False, short="ceiling"),
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


def queries_per_call(token: str, broker_url: str) -> dict[str, int]:
    """SQL statements of one call of each scenario, counted in process (deterministic). What
    the calls publish goes to the benchmark's own Redis, as the server's does."""
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
            counts[scenario.name] = len(captured.captured_queries)
            continue
        if scenario.path != "/mcp":
            with CaptureQueriesContext(connection) as captured:
                client.get(scenario.path)
            counts[scenario.name] = len(captured.captured_queries)
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
        counts[scenario.name] = len(captured.captured_queries)
    connection.close()
    return counts


# --- the run -----------------------------------------------------------------------------


@contextmanager
def running(process: Process) -> Iterator[Process]:
    try:
        yield process
    finally:
        process.stop()


def ratio(value: float, reference: float) -> float | None:
    return round(value / reference, 3) if reference else None


def rerender() -> int:
    """`bench/load.py --render`: the table and plot again from bench-results/load.json."""
    report = json.loads((RESULTS / "load.json").read_text())
    evaluate(report)
    print(render(report))
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
    report["elapsed_seconds"] = round(time.monotonic() - started, 1)
    report["machine"]["load_average_at_end"] = os.getloadavg()
    evaluate(report)
    if have_wrk and not partial_run():
        profile_missed(report)
    (RESULTS / "load.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(render(report))
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


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


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
            "rows": row_count("tooling_idempotencyrecord"),
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
        CEILING: [MCP_PING],
    }
    names = {s.name for s in chosen_scenarios}
    rows: list[Row] = []
    for baseline, members in groups.items():
        members = [name for name in members if name in names]
        if baseline == CEILING and CEILING not in names and not members:
            continue
        if baseline != CEILING and not members:
            continue
        if baseline == CEILING:
            rows.append(Row(CEILING, url, everything[CEILING], token, ours, "garante"))
        else:
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
    if CEILING in names:
        for tag, process, meter in offs:
            row = Row(f"{CEILING} {tag}", process.url, everything[CEILING], token, meter, "variant")
            rows.insert(rows.index(next(r for r in rows if r.name == CEILING)) + 1, row)

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
        "rows": row_count("tooling_idempotencyrecord"),
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
    env = dict(os.environ, GARANTE_BENCH_DB=BENCH_DB, GARANTE_BENCH_PG=PG_SERVER)
    done = subprocess.run(
        [PYTHON, "bench/cpu_breakdown.py", "--profile", *missed],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    report["profiles"] = done.stdout if done.returncode == 0 else done.stdout + done.stderr


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    postgres = psql("SHOW server_version", database="postgres")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "python": sys.version.split()[0],
        "postgresql": postgres,
        "kernel": os.uname().release,
        "load_average_at_start": os.getloadavg(),
    }


def round_ratios(report: dict[str, Any], name: str, reference: str) -> list[float]:
    """`name`'s req/s over `reference`'s, within each round."""
    ours = report.get("round_rps", {}).get(name, [])
    theirs = report.get("round_rps", {}).get(reference, [])
    return [a / b for a, b in zip(ours, theirs, strict=False) if b]


def evaluate(report: dict[str, Any]) -> None:
    """Ratios (medians of the rounds' ratios) and verdicts against issue 29's targets."""
    rows = report["scenarios"]
    verdicts = report["verdicts"] = {}
    for name, result in rows.items():
        if name not in TARGETS:
            continue
        reference, target = TARGETS[name]
        ratios = round_ratios(report, name, reference)
        if not ratios:
            continue
        result["ratio"] = round(median(ratios), 3)
        result["ratio_to"] = reference
        result["ratio_rounds"] = [round(value, 3) for value in ratios]
        verdicts[name] = {
            "measured": result["ratio"],
            "target": f">= {target}x {reference.removeprefix('baseline: ')}",
            "met": result["ratio"] >= target,
        }
    if "list_services" in rows and report["sdk"]:
        fastest_name = max(report["sdk"], key=lambda name: report["sdk"][name]["rps"])
        for sdk_name, result in report["sdk"].items():
            result["ours_over_it"] = round(
                median(round_ratios(report, "list_services", sdk_name)), 3
            )
        value = report["sdk"][fastest_name]["ours_over_it"]
        verdicts[f"list_services vs SDK ({fastest_name})"] = {
            "measured": value,
            "target": f">= {SDK_TARGET}x SDK",
            "met": value >= SDK_TARGET,
        }
    queries = report.get("queries", {})
    for name, budget in SQL_BUDGETS.items():
        if name in queries:
            verdicts[f"SQL per call: {name}"] = {
                "measured": queries[name],
                "target": f"<= {budget}",
                "met": queries[name] <= budget,
            }
    for name, result in report.get("variants", {}).items():
        on = name.split(" [off: ")[0]
        gains = [a - 1 for a in round_ratios(report, on, name)]
        if gains:
            result["gain"] = round(median(gains), 3)
            result["gain_rounds"] = [round(value, 3) for value in gains]
    growth = report["growth"]
    for kind, label in (("slots", "slot search"), ("replay", "key lookup (replay)")):
        small, large = growth.get(f"{kind}_small"), growth.get(f"{kind}_large")
        if small and large:
            value = ratio(large["p50_ms"], small["p50_ms"])
            growth[f"{kind}_p50_ratio"] = value
            verdicts[f"growth: {label}, {small['rows']:,} -> {large['rows']:,} rows (p50)"] = {
                "measured": value,
                "target": f"<= {GROWTH_TARGET}",
                "met": value is not None and value <= GROWTH_TARGET,
            }
    for kind, label in (("slots", "slot search query"), ("replay", "key lookup")):
        small, large = growth.get(f"{kind}_small"), growth.get(f"{kind}_large")
        if small and large and small.get("sql_lookup_ms"):
            value = ratio(large["sql_lookup_ms"], small["sql_lookup_ms"])
            growth[f"{kind}_sql_ratio"] = value
            # Informational: microseconds of index work, where one more B-tree level shows
            # as a large ratio of tiny numbers; the target is on the call's latency above.
            name = f"(info) {label} in SQL alone, {small['rows']:,} -> {large['rows']:,} rows"
            verdicts[name] = {
                "measured": value,
                "target": f"{small['sql_lookup_ms']:.3f}->{large['sql_lookup_ms']:.3f} ms",
                "met": None,
            }
    start, small = growth.get("slots_at_start"), growth.get("slots_small")
    if start and small:
        value = ratio(small["p50_ms"], start["p50_ms"])
        name = f"(info) slot search p50, {start['rows']:,} rows, drift over the run"
        verdicts[name] = {
            "measured": value,
            "target": f"{start['p50_ms']:.2f}->{small['p50_ms']:.2f} ms",
            "met": None,
        }
    memory = report.get("memory")
    if memory:
        value = ratio(memory["rss_after_kib"] - memory["rss_before_kib"], memory["rss_before_kib"])
        memory["growth"] = value
        verdicts[f"worker RSS growth over {memory['calls']:,} calls"] = {
            "measured": value,
            "target": f"<= {RSS_TARGET}",
            "met": value is not None and value <= RSS_TARGET,
        }


def render(report: dict[str, Any]) -> str:
    settings = report["settings"]
    lines = ["", f"Garante load benchmark — {settings['server']}"]
    lines.append(
        f"wrk, {settings['concurrency']} connections, {settings['seconds_per_scenario']:g} s "
        f"per run, medians of {settings.get('rounds', 1)} interleaved rounds; "
        f"{report['machine']['cores']} cores ({report['machine']['cpu']}); load average "
        f"{report['machine']['load_average_at_start'][0]:.1f} at start, "
        f"{report['machine'].get('load_average_at_end', [0])[0]:.1f} at end"
    )
    header = f"{'row':<52}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'SQL':>5}{'cpu ms':>8}"
    header += f"{'pg ms':>7}  {'ratio':>6}  {'target':<30}verdict"
    lines += ["", header, "-" * len(header)]
    queries = report.get("queries", {})
    verdicts = report.get("verdicts", {})
    ordered = report.get("rows") or [*report["scenarios"], *report["sdk"]]
    buckets = {**report["scenarios"], **report["sdk"], **report.get("variants", {})}
    for name in ordered:
        result = buckets.get(name)
        if result is None:
            continue
        ratio_text, target, verdict = "", "", ""
        if "ratio" in result:
            ratio_text = f"{result['ratio']:.2f}x"
            target = verdicts[name]["target"]
            verdict = "met" if verdicts[name]["met"] else "MISSED"
        elif "ours_over_it" in result:
            ratio_text = f"{result['ours_over_it']:.2f}x"
            target = "(list_services / this)"
        elif "gain" in result:
            ratio_text = f"{result['gain']:+.0%}"
            target = "(gain of the mechanism)"
        lines.append(
            f"{name[:51]:<52}{result['rps']:>8.0f}{result['p50_ms']:>8.1f}{result['p99_ms']:>8.1f}"
            f"{queries.get(name, ''):>5}{result.get('server_cpu_ms', 0):>8.2f}"
            f"{result.get('postgres_cpu_ms', 0):>7.2f}  {ratio_text:>6}  {target:<30}{verdict}"
        )
    lines.append(
        "(ratio: the median over the rounds of req/s over the target's reference measured in "
        "the same round; for SDK rows, our list_services over that server; for [off: ...] "
        "rows, as shipped over off, minus 1. cpu ms / pg ms: CPU time per request of the "
        "server's workers / of PostgreSQL)"
    )
    lopsided = [
        f"{name} ({result['busiest_worker_share']:.0%})"
        for name, result in buckets.items()
        if result.get("busiest_worker_share", 0) > BALANCED_SHARE
    ]
    if lopsided:
        lines.append(
            "(one worker did most of the work in the median run of: "
            + ", ".join(lopsided)
            + "; those rows measure about one core)"
        )
    other = {name: verdict for name, verdict in verdicts.items() if name not in buckets}
    if other:
        lines += ["", f"{'other targets':<72}{'measured':>10}  {'wanted':<10} verdict"]
        for name, verdict in other.items():
            measured = "" if verdict["measured"] is None else f"{verdict['measured']:.2f}"
            lines.append(
                f"{name:<72}{measured:>10}  {verdict['target']:<10} "
                f"{'' if verdict['met'] is None else 'met' if verdict['met'] else 'MISSED'}"
            )
    memory = report.get("memory")
    if memory:
        lines.append(
            f"\nworker RSS: {memory['rss_before_kib'] / 1024:.1f} MiB -> "
            f"{memory['rss_after_kib'] / 1024:.1f} MiB over {memory['calls']:,} calls "
            f"({memory['workers']} workers)"
        )
    growth = report.get("growth", {})
    for kind, ends in (("slots", ("at_start", "small", "large")), ("replay", ("small", "large"))):
        for end in ends:
            item = growth.get(f"{kind}_{end}")
            if item:
                loaded = (
                    f", loaded in {item['load_seconds']:.0f} s" if "load_seconds" in item else ""
                )
                when = ", before the measured runs" if end == "at_start" else ""
                lines.append(
                    f"growth {kind:<6} {item['rows']:>12,} rows: p50 {item['p50_ms']:.2f} ms, "
                    f"p99 {item['p99_ms']:.2f} ms (1 connection){loaded}{when}"
                )
    if report.get("profiles"):
        lines += ["", "Where the time goes in the scenarios that missed (bench/cpu_breakdown.py):"]
        lines.append(report["profiles"].rstrip())
    lines.append(f"\n(total {report.get('elapsed_seconds', 0):.0f} s)")
    return "\n".join(lines)


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds the context managers: servers are stopped


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    sys.exit(main())
