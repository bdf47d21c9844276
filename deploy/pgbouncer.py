"""PgBouncer for the cluster: a configuration of our own, in transaction pooling mode, run in the
foreground as a process the cluster started (docs/scaling.md)."""

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from deploy.processes import executable


def pgbouncer_command(directory: Path) -> list[str]:
    command = [executable("pgbouncer"), str(directory / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer refuses to run as root
        command[1:1] = ["-u", "postgres"]
    return command


def pgbouncer_configure(directory: Path, database_url: str, port: int, pool_size: int) -> list[str]:
    """Write a PgBouncer configuration in `directory` for the database of `database_url` on
    `port`; return the command that runs it in the foreground."""
    directory.mkdir(parents=True, exist_ok=True)
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    user = parts.username or "postgres"
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    # Transaction pooling: a server connection is lent for one transaction, so nothing of a
    # session survives between transactions (docs/scaling.md). Small pools: the machine's
    # PostgreSQL serves everybody (max_connections).
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
        "max_client_conn": 200,
        # A client waits at most this long for a server connection, then is refused (the
        # node answers SYSTEM): a saturated pool slows calls, it does not hang them.
        "query_wait_timeout": 10,
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
