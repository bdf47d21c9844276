"""Real multi-process servers for concurrency tests: gunicorn against the test database.

pytest-django's `live_server` is one process with threads; races between processes (and the
database locks they take) need a real gunicorn with several workers. Registered from
tests/conftest.py (`pytest_plugins = ["tests.servers"]`), so every test can use:

- `gunicorn_server` — a factory. `gunicorn_server(workers=3, threads=4, env={...})` starts
  `gunicorn config.wsgi` with DJANGO_SETTINGS_MODULE=tests.settings (so the same settings and
  the test-only tools) on a free port, against the CURRENT test database (the one
  pytest-django created, e.g. test_idem on PostgreSQL), waits until `/api/ping` answers, and
  returns a `GunicornServer` (`.url`, `.log()`, `.stop()`). Every server is stopped when the
  test ends, before the database is flushed; a failed test's report shows the tail of each
  server's log. `env` adds or overrides environment variables of the server (for example
  `{"GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS": "300"}`, read by the settings at start-up);
  `database_url=` points it at another database.
  The fixture needs `transactional_db` (it requests it): the server is another process and
  sees only committed rows, so build your data through services as usual and it is visible.

- `start_celery_worker(...)` — a context manager: `celery -A config worker` in its own process
  (production settings, solo pool) on one queue of a Redis database, against the given
  database, with extra environment (SMTP, SMS provider); yields the `CeleryWorker` (`.queue`,
  `.broker_url`, `.log`) once it is ready, and on exit stops it and deletes its queue's keys;
  `start_mail_worker(...)` is one whose email goes to a local SMTP server (`start_smtp`),
  yielding `(worker, inbox)`. In a module-scoped fixture,
  `postgresql_test_database_url(django_db_blocker)` gives the worker its database (or skips
  the module on SQLite).
  `celery_publisher` — a fixture: `celery_publisher(url)` makes this process publish for real
  (not eager) to that broker, restored after the test; `celery_publisher(url, queue=q)` also
  sends every task not routed elsewhere to queue `q` (a worker's `.queue`);
  `celery_publisher(url, eager=True)` runs tasks in process again (the test settings' way).

- `smtp_refusing` — a fixture: `smtp_refusing("550 5.1.1 No such user", times=None)` starts a
  mail server answering recipients with that reply (the first `times` of them; all if None;
  none without a reply) and sends this process's email to it; it returns the `RefusingSmtp`
  (`.rcpt_attempts`, `.messages`). `refusing_smtp(...)` is the same as a context manager.

- `free_port()` — a TCP port of 127.0.0.1 nothing listens on (a broker or server that is
  down, or one to start there).

- `start_smtp(delay=0)` — a context manager: a real SMTP server (aiosmtpd) on 127.0.0.1,
  yielding `(host, port, inbox)`; `inbox.messages` holds what it accepted, each message held
  `delay` seconds first (a slow mail server). `wait_for(predicate)` polls until the predicate
  returns something true, and returns it.

- `at_once(*calls)` — runs each callable in a thread of its own, all released together,
  each with its own database connection (closed after); returns their results in order, an
  exception standing in for the result of a call that raised.

- `sqlite_database` — a factory for the demo configuration: `sqlite_database()` creates a
  temporary, migrated SQLite file (a copy of one migrated once per session) and returns a
  `SqliteDatabase` (`.url` for `gunicorn_server(database_url=...)`, `.run(code)` to run
  Python against it in a Django subprocess — the test process stays on the test database).

Example::

    def test_fifty_duplicates_have_one_effect(gunicorn_server, company, token):
        server = gunicorn_server(workers=3, threads=8)
        with httpx.Client(base_url=server.url) as http:
            ...

Keep workers x threads modest (the machines have 2 cores and PostgreSQL's connections are
shared by everybody's test runs).
"""

import asyncio
import email
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from aiosmtpd.controller import Controller
from django.db import connection

from config.celery import app as celery_app
from core.transactions import advisory_keys

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_SECONDS = 60


def database_url_of_current_connection() -> str:
    """The URL of the database this test process uses now (the test database)."""
    conf = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{conf['NAME']}"
    user = conf.get("USER") or ""
    password = f":{conf['PASSWORD']}" if conf.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{conf['PORT']}" if conf.get("PORT") else ""
    return f"postgres://{auth}{conf.get('HOST') or '127.0.0.1'}{port}/{conf['NAME']}"


def server_environment(database_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": database_url,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


@dataclass
class GunicornServer:
    process: subprocess.Popen
    url: str
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the master (it stops its workers); kill it if it lingers."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting")


def waiting_backend(application_name: str) -> int | None:
    """The PostgreSQL server process of the connection named `application_name`, if it is
    waiting for a lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND wait_event_type = 'Lock'",
            [application_name],
        )
        row = cursor.fetchone()
    return row[0] if row else None


@contextmanager
def frozen_backend(application_name: str, release: Callable[[], Any]) -> Iterator[int]:
    """A database that stops answering one connection in the middle of a statement (a
    failover to another host, a partition, a frozen server), while new connections are
    served: the server process of the connection named `application_name`, caught waiting
    for a lock the test holds, is stopped (SIGSTOP), and `release` gives up that lock, which
    the stopped process is granted and never answers. On leaving, the process is continued
    and ended (`pg_terminate_backend`), as a failover or the server's keepalive ends it, and
    what it held is let go. Skips the test where server processes cannot be signalled."""
    backend = wait_for(lambda: waiting_backend(application_name), interval=0.02)
    try:
        os.kill(backend, signal.SIGSTOP)
    except PermissionError:
        pytest.skip("cannot stop a PostgreSQL server process as this user")
    try:
        release()
        yield backend
    finally:
        os.kill(backend, signal.SIGCONT)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend])


def at_once(*calls: Callable[[], Any], timeout: float = 120.0) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = calls[index]()
        except Exception as error:  # shown in the results, for the test to judge
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return results


# Email -----------------------------------------------------------------------------------


class Inbox:
    """An aiosmtpd handler keeping what it accepts, each message after `delay` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted"


@contextmanager
def start_smtp(delay: float = 0.0) -> Iterator[tuple[str, int, Inbox]]:
    inbox = Inbox(delay)
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.hostname, controller.port, inbox
    finally:
        controller.stop()


@contextmanager
def start_mail_worker(
    *,
    database_url: str,
    redis_db: int,
    log_dir: Path,
    env: dict[str, str] | None = None,
    smtp_delay: float = 0.0,
) -> Iterator[tuple["CeleryWorker", Inbox]]:
    """A real worker (`start_celery_worker`, with `env` besides) whose email goes to a local
    SMTP server of its own (answering after `smtp_delay`); yields the worker and the inbox."""
    with (
        start_smtp(delay=smtp_delay) as (host, port, inbox),
        start_celery_worker(
            database_url=database_url,
            redis_db=redis_db,
            log_dir=log_dir,
            env={
                "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                "EMAIL_HOST": host,
                "EMAIL_PORT": str(port),
                **(env or {}),
            },
        ) as worker,
    ):
        yield worker, inbox


def mail_through_a_database_that_stops_answering(
    *,
    database_url: str,
    redis_db: int,
    log_dir: Path,
    publish_to: Callable[..., None],
    create: Callable[[], Any],
    sent: Callable[[Any], Any],
) -> tuple["CeleryWorker", Inbox]:
    """A real mail worker whose email task finds its database silent mid-statement
    (`frozen_backend`, at the task's first statement: the record's advisory lock of
    `core.transactions.one_at_a_time`, held by the test). `create` makes the record whose
    committing publishes the task (while the worker is stopped, so the lock is held first);
    once the worker has logged the task's retry, the silent session is ended, and the worker
    and inbox are returned when `sent(record)` is true."""
    name = f"garante-worker-{time.monotonic_ns()}"
    with (
        psycopg.connect(database_url, autocommit=True) as holder,
        start_mail_worker(
            database_url=f"{database_url}?application_name={name}",
            redis_db=redis_db,
            log_dir=log_dir,
            env={"GARANTE_DB_ANSWER_SECONDS": "2"},
        ) as (worker, inbox),
    ):
        publish_to(worker.broker_url, queue=worker.queue)
        worker.process.send_signal(signal.SIGSTOP)
        try:
            record = create()
            keys = advisory_keys(type(record), record.pk)
            holder.execute("SELECT pg_advisory_lock(%s, %s)", keys)
        finally:
            worker.process.send_signal(signal.SIGCONT)
        with frozen_backend(
            name, release=lambda: holder.execute("SELECT pg_advisory_unlock(%s, %s)", keys)
        ):
            wait_for(lambda: b"retry: Retry in" in worker.log.read_bytes(), timeout=30)
        wait_for(lambda: sent(record), timeout=30)
        return worker, inbox


def _listening_socket() -> socket.socket:
    # Bound here and handed to gunicorn as fd://N: no window in which another process could
    # take the port between choosing it and binding it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def start_gunicorn(
    *,
    database_url: str,
    log_dir: Path,
    workers: int = 2,
    threads: int = 1,
    env: dict[str, str] | None = None,
    timeout: int = 60,
) -> GunicornServer:
    sock = _listening_socket()
    port = sock.getsockname()[1]
    log_path = log_dir / f"gunicorn-{port}.log"
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"fd://{sock.fileno()}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--timeout",
        str(timeout),
        "--graceful-timeout",
        "5",
        # Tests often connect first and send later (to release many requests at once);
        # gunicorn's default of 2 s would close those idle connections in between.
        "--keep-alive",
        "60",
        "--log-level",
        "warning",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=server_environment(database_url, env),
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
            start_new_session=True,  # its own process group, so a lingering tree can be killed
        )
    sock.close()
    server = GunicornServer(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.url}/api/ping", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"gunicorn did not become ready:\n{server.log()}")
        time.sleep(0.1)


_SERVERS = pytest.StashKey[list[GunicornServer]]()
LOG_TAIL_CHARACTERS = 20_000


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test shows the tail of each of its servers' logs (the tracebacks of what the
    server answered SYSTEM), which is gone with the test's temporary folder otherwise."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for server in item.stash.get(_SERVERS, []):
            report.sections.append(
                (f"gunicorn log {server.url} (tail)", server.log()[-LOG_TAIL_CHARACTERS:])
            )


@pytest.fixture
def gunicorn_server(
    transactional_db: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., GunicornServer]]:
    servers: list[GunicornServer] = []
    request.node.stash[_SERVERS] = servers

    def start(
        *,
        workers: int = 2,
        threads: int = 1,
        env: dict[str, str] | None = None,
        database_url: str | None = None,
    ) -> GunicornServer:
        server = start_gunicorn(
            database_url=database_url or database_url_of_current_connection(),
            log_dir=tmp_path,
            workers=workers,
            threads=threads,
            env=env,
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@dataclass
class SqliteDatabase:
    path: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def run(self, code: str) -> Any:
        """Run Python `code` with Django set up against this database; return the JSON value
        the code assigns to `result`."""
        script = (
            f"import django, json\ndjango.setup()\n{code}\nprint('RESULT:' + json.dumps(result))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=server_environment(self.url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"SQLite helper failed:\n{done.stdout}\n{done.stderr}")
        line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT:"))
        return json.loads(line.removeprefix("RESULT:"))


def _migrated_sqlite(path: Path) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=server_environment(f"sqlite:///{path}"),
        check=True,
        timeout=300,
    )


@pytest.fixture(scope="session")
def _sqlite_template() -> Iterator[Path]:
    # Migrating takes a while; do it once per session and copy the file for each test.
    with tempfile.TemporaryDirectory(prefix="garante-sqlite-template-") as directory:
        path = Path(directory) / "template.sqlite3"
        _migrated_sqlite(path)
        yield path


@pytest.fixture
def sqlite_database(
    _sqlite_template: Path, tmp_path: Path
) -> Iterator[Callable[[], SqliteDatabase]]:
    def create() -> SqliteDatabase:
        database = SqliteDatabase(tmp_path / f"demo-{time.monotonic_ns()}.sqlite3")
        shutil.copyfile(_sqlite_template, database.path)
        return database

    yield create


# Celery ----------------------------------------------------------------------------------


def _point_publisher(url: str | None, *, eager: bool, queue: str) -> tuple[str | None, bool, str]:
    """Point this process's Celery publisher at `url` and `queue`; returns what it was."""
    conf = celery_app.conf
    previous = (conf.broker_url, conf.task_always_eager, conf.task_default_queue)
    # kombu keeps a pool per app (and the old one stays usable): drop them to use the new URL.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    # The router reads the default queue at each publish: every task not routed elsewhere.
    conf.broker_url, conf.task_always_eager, conf.task_default_queue = url, eager, queue
    return previous


@pytest.fixture
def celery_publisher() -> Iterator[Callable[..., None]]:
    """Publish for real (not eager) to a broker URL, and to a worker's queue if given; the
    test settings are restored after."""
    saved: list[tuple[str | None, bool, str]] = []

    def point(url: str, *, eager: bool = False, queue: str | None = None) -> None:
        saved.append(
            _point_publisher(url, eager=eager, queue=queue or celery_app.conf.task_default_queue)
        )

    yield point
    if saved:
        url, eager, queue = saved[0]
        _point_publisher(url, eager=eager, queue=queue)


@dataclass
class CeleryWorker:
    queue: str
    broker_url: str
    log: Path
    process: subprocess.Popen | None = None


def postgresql_test_database_url(django_db_blocker: Any) -> str:
    """For a module's worker fixture: the test database's URL, or the module skipped when the
    tests run on SQLite (another process cannot share the test's database there)."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("the worker process needs the PostgreSQL test database")
        return database_url_of_current_connection()


def task_log(worker: "CeleryWorker | Path", task: str, since: int = 0) -> list[str]:
    """What a worker's log (`--loglevel` INFO or lower) says happened to the tasks named `task`
    after byte `since` of it, in order: "received", "succeeded", "retry", "failed" each time.

    A worker logs a retry when the run that asks for it ends, so once a run has succeeded the
    retries it scheduled (if any) are already in the log: tests wait for "succeeded" and then
    judge, instead of sleeping past a backoff and hoping."""
    path = worker.log if isinstance(worker, CeleryWorker) else worker
    text = path.read_bytes()[since:].decode(errors="replace")
    pattern = re.compile(
        rf"Task {re.escape(task)}\[[0-9a-f-]+\] (received|succeeded|retry|raised unexpected)"
    )
    outcome = {"raised unexpected": "failed"}
    return [outcome.get(m.group(1), m.group(1)) for m in pattern.finditer(text)]


@contextmanager
def start_celery_worker(
    *, database_url: str, redis_db: int, log_dir: Path, env: dict[str, str] | None = None
) -> Iterator[CeleryWorker]:
    """A real `celery -A config worker` on a queue of its own in Redis database `redis_db`."""
    queue = f"test-{uuid.uuid4().hex[:10]}"
    worker = CeleryWorker(
        queue=queue,
        broker_url=f"redis://127.0.0.1:6379/{redis_db}",
        log=log_dir / f"worker-{queue}.log",
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": worker.broker_url,
        **(env or {}),
    }
    environment.pop("CELERY_TASK_ALWAYS_EAGER", None)
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "config",
        "worker",
        "--pool=solo",
        "--queues",
        queue,
        "--loglevel=DEBUG",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--hostname",
        f"{queue}@%h",
    ]
    with worker.log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
        )
    worker.process = process
    try:
        deadline = time.monotonic() + 90
        while process.poll() is None and b" ready." not in worker.log.read_bytes():
            if time.monotonic() > deadline:
                pytest.fail(f"the worker did not become ready:\n{worker.log.read_text()}")
            time.sleep(0.1)
        if process.poll() is not None:
            pytest.fail(f"the worker exited:\n{worker.log.read_text()}")
        yield worker
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        # Leave the Redis database as it was found.
        client = redis.Redis.from_url(worker.broker_url)
        for name in client.scan_iter(match=f"*{queue}*"):
            client.delete(name)
        client.delete("_kombu.binding_deadlines")
        client.close()


@dataclass
class RefusingSmtp:
    """A mail server answering recipients with `reply` (the first `times` of them; all, if
    None), the others accepted (all, with no `reply`); it keeps each message it accepts with
    its envelope recipients."""

    reply: str | None = None
    times: int | None = None
    rcpt_attempts: int = 0
    messages: list[tuple[list[str], email.message.Message]] = field(default_factory=list)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        self.rcpt_attempts += 1
        if self.reply and (self.times is None or self.rcpt_attempts <= self.times):
            return self.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content)
        self.messages.append((list(envelope.rcpt_tos), message))
        return "250 Message accepted"


@contextmanager
def refusing_smtp(
    reply: str | None, times: int | None = None
) -> Iterator[tuple[str, int, RefusingSmtp]]:
    handler = RefusingSmtp(reply, times)
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.hostname, controller.port, handler
    finally:
        controller.stop()


@pytest.fixture
def smtp_refusing(settings) -> Iterator[Callable[..., RefusingSmtp]]:
    """Start a `RefusingSmtp` and send this process's email to it."""
    with ExitStack() as stack:

        def start(reply: str | None = None, times: int | None = None) -> RefusingSmtp:
            host, port, handler = stack.enter_context(refusing_smtp(reply, times))
            settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
            settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
            return handler

        yield start
