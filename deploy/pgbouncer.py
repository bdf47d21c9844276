"""PgBouncer for the cluster: a configuration of our own, in transaction pooling mode, run in the
foreground as a process the cluster started, with its pool sized by docs/scaling.md's model."""

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from deploy.processes import executable

# PgBouncer looks at its clients' waits about once a second: a timeout is noticed up to that
# much late.
JANITOR_SECONDS = 1.0
# Server connections a transaction holds while it waits on a row lock (an idempotency
# duplicate waits up to GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS): beyond the ones that make
# progress, so that a few waiters do not stall everybody else.
LOCK_WAITERS = 4
# PostgreSQL connections left outside PgBouncer's pool: migrations, manage.py against the
# cluster, an operator's psql, the tests' direct reads.
DIRECT_CONNECTIONS = 10


@dataclass(frozen=True)
class PoolModel:
    """docs/scaling.md's pool model, for one database behind PgBouncer.

    A call holds at most one server connection at a time (its transaction), so the pool may be
    smaller than the threads that use it: a thread that finds every server connection lent
    waits in PgBouncer's queue, and a queue cannot deadlock. The pool is sized for what the
    server can run at once (two transactions per core make progress, plus a few waiting on a
    lock), never above the clients that could use it; the clients are every thread that
    holds a connection (each web thread, each process's bookkeeping writer, each Celery
    process); the queue's wait ends strictly before the per-call deadline
    (GARANTE_CALL_DEADLINE_SECONDS, which the cluster sets to GARANTE_DB_ANSWER_SECONDS), so
    a saturated pool answers SYSTEM from PgBouncer's refusal rather than from a call cut at
    its deadline.
    """

    server_connections: int
    client_connections: int
    query_wait_timeout: float

    @classmethod
    def plan(
        cls,
        *,
        server_cores: int,
        web_processes: int,
        threads_per_process: int,
        celery_processes: int,
        db_answer_seconds: float,
        lock_wait_seconds: float,
        server_connections: int | None = None,
    ) -> "PoolModel":
        clients = web_processes * (threads_per_process + 1) + celery_processes * 2
        pool = server_connections or min(clients, 2 * server_cores + LOCK_WAITERS)
        return cls(
            server_connections=pool,
            # Twice the steady clients: a node restarting overlaps its old and new processes,
            # and manage.py commands come and go. A client connection costs PgBouncer a few KB.
            client_connections=2 * clients + DIRECT_CONNECTIONS,
            query_wait_timeout=query_wait_timeout(db_answer_seconds, lock_wait_seconds),
        )


def query_wait_timeout(db_answer_seconds: float, lock_wait_seconds: float) -> float:
    """How long a client may wait for a server connection: past the lock waits that hold
    server connections (a queue behind them moves within that), and strictly below the
    per-call deadline by twice PgBouncer's janitor period, so that its refusal reaches the
    node before the node's own deadline cuts the call. 0 (no deadline): past the lock wait."""
    past_locks = lock_wait_seconds + JANITOR_SECONDS
    if not db_answer_seconds:
        return past_locks
    below_deadline = db_answer_seconds - 2 * JANITOR_SECONDS
    if below_deadline < 0.5:
        raise ValueError(
            f"GARANTE_DB_ANSWER_SECONDS={db_answer_seconds:g} leaves PgBouncer's queue no "
            f"wait below it: at least {2 * JANITOR_SECONDS + 0.5:g} s behind PgBouncer"
        )
    return math.floor(min(past_locks, below_deadline) * 10) / 10


def pgbouncer_command(directory: Path) -> list[str]:
    command = [executable("pgbouncer"), str(directory / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        command[1:1] = ["-u", "postgres"]
    return command


def pgbouncer_configure(
    directory: Path,
    database_url: str,
    port: int,
    pool_size: int,
    *,
    query_wait_timeout: float = query_wait_timeout(10, 5),
    max_client_conn: int = 200,
) -> list[str]:
    """Write a PgBouncer configuration in `directory` for the database of `database_url` on
    `port`, with `pool_size` server connections; return the command that runs it in the
    foreground. The defaults suit the settings' defaults (GARANTE_DB_ANSWER_SECONDS 10,
    GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS 5000)."""
    directory.mkdir(parents=True, exist_ok=True)
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    user = parts.username or "postgres"
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    # Transaction pooling: a server connection is lent for one transaction, so nothing of a
    # session survives between transactions (docs/scaling.md). Small pools (PoolModel): the
    # machine's PostgreSQL serves everybody (max_connections).
    settings = {
        "listen_addr": "127.0.0.1",
        "listen_port": port,
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": directory / "userlist.txt",
        "pool_mode": "transaction",
        "default_pool_size": pool_size,
        "max_db_connections": pool_size,
        "min_pool_size": 0,
        "reserve_pool_size": 0,
        "max_client_conn": max_client_conn,
        # A client waits at most this long for a server connection, then is refused (the
        # node answers SYSTEM): a saturated pool slows calls, it does not hang them, and the
        # refusal comes before the node's deadline (PoolModel).
        "query_wait_timeout": query_wait_timeout,
        # Django's psycopg sends no startup options; these are harmless if a client does.
        "ignore_startup_parameters": "extra_float_digits,options",
        "pidfile": directory / "pgbouncer.pid",
        "logfile": directory / "pgbouncer.log",
        "admin_users": user,
        "stats_users": user,
    }
    lines = [
        "[databases]",
        f"{name} = host={parts.hostname or '127.0.0.1'} port={parts.port or 5432} dbname={name}",
        "[pgbouncer]",
        *(f"{key} = {value}" for key, value in settings.items()),
    ]
    (directory / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
        for path in directory.iterdir():
            shutil.chown(path, "postgres")
    return pgbouncer_command(directory)
