"""A PostgreSQL database of a run's own, dropped and created fresh, and dropped again after:
for the scripts that start real servers outside pytest (tests/conformance/run.py,
tests/config/packaging.py)."""

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
