"""What the scripts that start real servers outside pytest share (tests/conformance/run.py,
tests/config/packaging.py): a database of a run's own, and stopping what they started."""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit


@contextmanager
def scratch_database(server_url: str, name: str) -> Iterator[str]:
    """The URL of database `name` on the server of `server_url`, fresh for the block."""
    import psycopg  # only where PostgreSQL is used: the SQLite runs do without it

    parts = urlsplit(server_url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stop_process(process: subprocess.Popen) -> None:
    """Stop a process started in a session of its own: SIGTERM, then its whole group killed
    if it has not exited within 30 s."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
