"""Reliability fixtures: a PostgreSQL cluster and a redis-server of our own, to stop at will.

The shared PostgreSQL (5432) and Redis (6379) serve everybody's tests at the same time, so the
outage tests never touch them: `outage_stack` starts a private cluster (initdb into a temporary
directory, as the `postgres` user when we are root, trust auth, a free port) and a private
redis-server (a free port, no persistence), loads the schema by copying the migrated test
database with pg_dump, seeds the sandbox with `seed_sandbox`, and serves it with gunicorn and
the production settings (`config.settings`: persistent connections, a real Celery broker).
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from tests.servers import (
    GunicornServer,
    database_url_of_current_connection,
    free_port,
    start_gunicorn,
)

ROOT = Path(__file__).resolve().parents[2]
OUTPUT_LIMIT = 3000
# What must never reach the wire, whatever was sent.
LEAK_MARKERS = ("Traceback (most recent call last)", 'File "/', "site-packages", "django.db.")


def postgres_bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        done = subprocess.run([found, "--bindir"], capture_output=True, text=True)
        if done.returncode == 0 and (Path(done.stdout.strip()) / "initdb").exists():
            return Path(done.stdout.strip())
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    return candidates[0].parent if candidates else None


# --- a PostgreSQL cluster of our own -----------------------------------------------------


@dataclass
class OwnPostgres:
    """A throw-away PostgreSQL cluster on a free port; `stop()` and `start()` are the outage."""

    bindir: Path
    directory: Path
    port: int
    as_postgres: list[str]

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        command = [*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {args[-1]} failed:\n{done.stdout}\n{done.stderr}")

    def init(self) -> None:
        command = [*self.as_postgres, str(self.bindir / "initdb"), "-D", str(self.data)]
        command += ["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
        options += " -c max_connections=40"
        log = str(self.directory / "postgres.log")
        self._pg_ctl("-o", options, "-l", log, "-w", "-t", "60", "start")

    def stop(self, mode: str = "immediate") -> None:
        """`immediate` is a crash as far as clients can tell: connections drop at once and
        the next start replays the WAL."""
        self._pg_ctl("-m", mode, "-w", "-t", "60", "stop")

    def psql(self, sql: str, database: str = "garante") -> str:
        command = ["psql", self.url(database), "-v", "ON_ERROR_STOP=1", "-Atq", "-c", sql]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr}")
        return done.stdout.strip()


def own_postgres(directory: Path) -> OwnPostgres:
    bindir = postgres_bindir()
    if bindir is None or shutil.which("psql") is None or shutil.which("pg_dump") is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl, pg_dump, psql) are not installed")
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root: the cluster belongs to the postgres user.
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start a PostgreSQL cluster")
        try:
            import pwd

            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("no 'postgres' system user to own a private PostgreSQL cluster")
        # The postgres user must reach the directory through its (root-owned) parent.
        os.chmod(directory.parent, 0o755)
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    cluster = OwnPostgres(bindir, directory, free_port(), as_postgres)
    cluster.init()
    cluster.start()
    return cluster


# --- a redis-server of our own -----------------------------------------------------------


@dataclass
class OwnRedis:
    directory: Path
    port: int
    process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 20
        while self.command("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)
        self.process = None

    def command(self, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip()


# --- calling the server ------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    text: str
    headers: dict[str, str]
    seconds: float
    sent_at: float
    answered_at: float

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def result(self) -> dict[str, Any]:
        return self.json["result"]

    @property
    def body(self) -> dict[str, Any]:
        """The tool's answer (structuredContent), error or not."""
        return self.result["structuredContent"]

    @property
    def error_type(self) -> str | None:
        return self.body.get("error_type") if self.result["isError"] else None


class Gateway:
    """Plays the Gateway over MCP (legacy era, the one deployed clients speak) on one HTTP
    connection pool; thread-safe."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30) -> None:
        self.url = f"{base_url}/mcp"
        self.http = httpx.Client(
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25",
            },
            timeout=timeout,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
        )

    def close(self) -> None:
        self.http.close()

    def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        conversation: str,
        key: str | None = None,
        request_id: int = 1,
    ) -> Answer:
        meta = {"com.asixto/conversationId": conversation}
        if key is not None:
            meta["com.asixto/idempotencyKey"] = key
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        sent_at = time.monotonic()
        response = self.http.post(self.url, json=body)
        answered_at = time.monotonic()
        return Answer(
            response.status_code,
            response.text,
            dict(response.headers),
            answered_at - sent_at,
            sent_at,
            answered_at,
        )


def assert_clean_wire(text: str) -> None:
    """No stack trace, no file path, no driver text on the wire."""
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{marker!r} on the wire: {text[:500]}"


# --- the outage stack --------------------------------------------------------------------


@dataclass
class OutageStack:
    postgres: OwnPostgres
    redis: OwnRedis
    server: GunicornServer
    token: str

    def gateway(self, **options: Any) -> Gateway:
        return Gateway(self.server.url, self.token, **options)


def _copy_test_schema(cluster: OwnPostgres) -> None:
    """The migrated test database's schema (and its migration rows), without re-migrating."""
    source = database_url_of_current_connection()
    if not str(connection.settings_dict["NAME"]).startswith("test_"):
        # Without a django_db test in the session, pytest-django creates no test database.
        raise RuntimeError(f"not the test database ({source}): mark the test django_db")
    cluster.psql("CREATE DATABASE garante", database="postgres")
    dump = subprocess.run(
        ["pg_dump", "--no-owner", "--no-acl", source],
        capture_output=True,
        timeout=120,
        check=True,
    )
    load = subprocess.run(
        ["psql", cluster.url("garante"), "-v", "ON_ERROR_STOP=1", "-q"],
        input=dump.stdout,
        capture_output=True,
        timeout=120,
    )
    if load.returncode != 0:
        raise RuntimeError(f"loading the schema failed: {load.stderr.decode()[-2000:]}")
    # Rows other tests may have left behind are not ours: the sandbox starts empty.
    tables = cluster.psql(
        "SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables "
        "WHERE schemaname = 'public' AND tablename <> 'django_migrations'"
    )
    cluster.psql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


def _seed_sandbox(database_url: str) -> str:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "PYTHONPATH": str(ROOT),
            "GARANTE_LOG_LEVEL": "WARNING",
            "CELERY_TASK_ALWAYS_EAGER": "1",
        }
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "seed_sandbox"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"seed_sandbox failed:\n{done.stdout}\n{done.stderr}")
    token = next(
        line.split(":", 1)[1].strip()
        for line in done.stdout.splitlines()
        if line.strip().startswith("Gateway token:")
    )
    return token


@pytest.fixture(scope="module")
def outage_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[OutageStack]:
    if connection.vendor != "postgresql":
        pytest.skip("the outage tests copy the PostgreSQL test database's schema")
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="garante-outage-") as tmp:
        root = Path(tmp)
        (root / "pg").mkdir()
        (root / "redis").mkdir()
        (root / "logs").mkdir()
        cluster = own_postgres(root / "pg")
        redis = OwnRedis(root / "redis", free_port())
        server = None
        try:
            redis.start()
            with django_db_blocker.unblock():
                _copy_test_schema(cluster)
            token = _seed_sandbox(cluster.url("garante"))
            server = start_gunicorn(
                database_url=cluster.url("garante"),
                log_dir=root / "logs",
                workers=2,
                threads=4,
                env={
                    # Production settings: persistent connections, a real broker, no eager tasks.
                    "DJANGO_SETTINGS_MODULE": "config.settings",
                    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                    "CELERY_BROKER_URL": redis.url,
                    "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
                    "GARANTE_SMS_BACKEND": "console",
                    "GARANTE_LOG_LEVEL": "WARNING",
                },
            )
            yield OutageStack(cluster, redis, server, token)
        finally:
            if server is not None:
                server.stop()
            redis.stop()
            with contextlib.suppress(RuntimeError):  # already stopped by a failed test
                cluster.stop("fast")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
