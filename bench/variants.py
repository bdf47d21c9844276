"""The speed mechanisms that depart from plain Django, each with the switch that turns it off.

bench/load.py with `GARANTE_BENCH_OFF=<name>[,<name>...][;<group>...]` serves, for each group,
one more Garante with those mechanisms off (bench/variant_wsgi.py, bench/variant_settings.py),
measured next to the one as shipped, interleaved within each round, so every mechanism's gain
is measured on its own scenario in the same run (docs/performance.md, "Mechanisms").
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mechanism:
    what: str  # what it does, and where it lives
    scenarios: tuple[str, ...]  # the scenarios whose speed it is for
    env: dict[str, str] = field(default_factory=dict)  # turned off by these variables
    gunicorn_drop: tuple[str, ...] = ()  # ... or by dropping these gunicorn arguments
    gunicorn_add: tuple[str, ...] = ()  # ... or by adding these
    # Otherwise bench/variant_settings.py or bench/variant_wsgi.py turns it off by its name.


READS = ("list_services", "find_available_slots")
WRITES = ("identify_contact (first write)", "open_case (first write)")
REPLAY = ("open_case (replay)",)
PINGS = ("GET /api/ping", "MCP ping (auth + envelope, no tool)")
ALL = ("MCP ping (auth + envelope, no tool)", *READS, *WRITES, *REPLAY)

MECHANISMS: dict[str, Mechanism] = {
    "request_log": Mechanism(
        "core/request_log.py: one log line per request (logger garante.requests, INFO), with "
        "its request id, surface, status, duration and, for a tool call, the call's fields; "
        "off here means that logger at WARNING, the rest of the logging as shipped",
        (*PINGS, "list_services", *REPLAY),
    ),
    "metrics": Mechanism(
        "core/metrics.py: the Prometheus series counted on every request (HTTP requests and "
        "their duration, core/request_log.py; tool calls, tooling/metrics.py; the idempotency "
        "engine's outcomes), in prometheus_client's multiprocess mode as gunicorn.conf.py sets "
        "it; off here means every series a no-op (bench/variant_wsgi.py)",
        (*PINGS, "list_services", *REPLAY),
    ),
    "process_cache": Mechanism(
        "core/process_cache.py: the token's company and the service catalogue kept in each "
        "process for 1 s (GARANTE_PROCESS_CACHE_SECONDS)",
        ("MCP ping (auth + envelope, no tool)", *READS),
        env={"GARANTE_PROCESS_CACHE_SECONDS": "0"},
    ),
    "deferred_writes": Mechanism(
        "core/deferred.py: the trace and the replay counters written in batches by a "
        "thread of each process (GARANTE_DEFERRED_WRITE_SECONDS)",
        (*READS, *WRITES, *REPLAY),
        env={"GARANTE_DEFERRED_WRITE_SECONDS": "0"},
    ),
    "prepared_statements": Mechanism(
        "config/settings.py: statements run more than twice on a connection prepared by "
        "PostgreSQL (GARANTE_PG_PREPARE_THRESHOLD; empty turns it off)",
        ALL,
        env={"GARANTE_PG_PREPARE_THRESHOLD": ""},
    ),
    "server_side_binding": Mechanism(
        "config/settings.py: parameters bound by the server (psycopg's server_side_binding), "
        "which prepared statements need; off here means Django's client-side binding, and no "
        "preparing",
        ALL,
    ),
    "answer_deadline": Mechanism(
        "core/postgresql/base.py: every exchange with PostgreSQL watched by a deadline "
        "thread (a reliability mechanism: its cost, not a gain, is what is measured)",
        ALL,
    ),
    "hand_built_sql": Mechanism(
        "core.sql: the hottest reads (the idempotency key lookup, core/idempotency/engine.py; "
        "the call's conversation, tooling/context.py; the contact an identifier names, "
        "core/identity/binding.py) as SQL built once from the models' metadata, rows "
        "converted by core.sql, instead of a queryset compiled on every call",
        (*WRITES, *REPLAY),
    ),
    "slot_search_sql": Mechanism(
        "agenda/availability/queries.py: the slot search's two statements (the roster with its "
        "hours and rules; appointments and time off in one UNION ALL) built once from the "
        "models' metadata (core.sql), instead of querysets compiled on every search",
        ("find_available_slots",),
    ),
    "insert_unless_conflict": Mechanism(
        "core/sql.py insert_unless_conflict: a new conversation's or case's INSERT ... ON "
        "CONFLICT DO NOTHING, a conflict an empty result, instead of the ORM's INSERT in a "
        "savepoint with the conflict an IntegrityError (2 statements more)",
        WRITES,
    ),
    "health_check_poll": Mechanism(
        "core/postgresql/base.py is_usable: a kept connection's health check (CONN_HEALTH_CHECKS) "
        "polls its socket and pays Django's SELECT 1 only when the server has sent something",
        (*REPLAY, *WRITES),
    ),
    "writes_with_answer": Mechanism(
        "core/sql.py execute_all: a write's exposure-ledger rows sent with its stored answer "
        "(core/idempotency/engine.py _store) as one statement, a data-modifying WITH on "
        "PostgreSQL, instead of two round trips",
        ("open_case (first write)",),
    ),
    "ledger_upsert": Mechanism(
        "tooling/ledger.py _upsert: the references a call shows upserted in one hand-built "
        "statement that skips rows shown unchanged within a minute, instead of the ORM's "
        "bulk_create(update_conflicts=True), which writes every row again",
        ("find_available_slots",),
    ),
    "limits_sql": Mechanism(
        "core/identity/limits.py _recent_failures: the three failure limits read in one "
        "hand-built UNION ALL instead of the same union compiled from querysets per call",
        ("identify_contact (first write)",),
    ),
    "machine_api_middleware": Mechanism(
        "core/middleware.py: the browser's six middleware (sessions, locale, CSRF, auth, "
        "messages, frame options) step aside for the machine API's requests",
        ("MCP ping (auth + envelope, no tool)", *READS),
    ),
    "h1c_parser": Mechanism(
        "requirements.txt gunicorn_h1c: gunicorn parses HTTP with its C parser",
        ("GET /api/ping", *ALL),
        gunicorn_add=("--http-parser", "python"),
    ),
    "reuse_port": Mechanism(
        "bench and deployment: gunicorn --reuse-port, a listening socket per worker so the "
        "kernel spreads kept-alive connections over both",
        ("GET /api/ping", *ALL),
        gunicorn_drop=("--reuse-port",),
    ),
}


def chosen(names: str) -> list[str]:
    """The mechanisms named in GARANTE_BENCH_OFF (comma-separated), checked."""
    picked = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in picked if name not in MECHANISMS]
    if unknown:
        raise SystemExit(f"GARANTE_BENCH_OFF: unknown {unknown}; known: {sorted(MECHANISMS)}")
    return picked
