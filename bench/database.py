"""The benchmark's own database: prepared, seeded, filled for the growth points, timed in SQL."""

import json
import re
import subprocess
import time

from bench.config import (
    BENCH_DB,
    PG_SERVER,
    PLAIN_ITEMS,
    PYTHON,
    RECORDS_BATCH,
    ROOT,
    environment,
    next_monday,
)


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
            created_via, created_at, updated_at, sequence, notes)
        SELECT p.company_id, 'AP-B' || (base.b + g), k.id, s.id, p.id,
               t, t + interval '30 minutes', t, t + interval '40 minutes', 'attended',
               'staff', t, t, 0, ''
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
    """Bring core_idempotencyrecord towards `total` rows, in batches (seconds taken).

    Keys look like the Gateway's (hex digests), spread over the whole index. A large load
    (more than one batch) drops the table's secondary indexes and unique constraint first and
    builds them again at the end, as a bulk load should: inserting random keys into a live
    B-tree is what made 10,000,000 rows take many minutes. With a budget, stops after the
    batch that exhausts it: the caller reports the size actually reached.
    """
    started = time.monotonic()
    table = "core_idempotencyrecord"
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
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM core_idempotencyrecord "
        f"WHERE company_id = (SELECT id FROM core_company WHERE slug = 'sandbox') "
        f"AND key = md5('bulk-' || {n * 7919 % 10_000 + 1});"
        for n in range(samples)
    )
    plans = json.loads("[" + psql(statements).replace("\n]\n[", "],[") + "]")
    times = sorted(plan[0]["Execution Time"] for plan in plans)
    return round(times[len(times) // 2], 4)


def slot_window_ms(samples: int = 20) -> float:
    """Median server-side execution time of the slot search's appointment query (the
    both-sides-bounded range scan of agenda.availability.busy.scheduled_in_window) over the two
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
