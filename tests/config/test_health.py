"""GET /healthz (liveness, no database) and GET /readyz (database, migrations, broker), answered
before Host checks, redirects, sessions and the tool API's auth; /readyz answers 503 naming what
failed, never a host or an error message, within its bound however the services fail."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from django.test import Client

from config import health
from tests.servers import free_port

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_the_database_or_a_known_host(django_assert_num_queries):
    client = Client(HTTP_HOST="10.0.0.7:8000")  # a probe by the pod's address
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"
    assert "Set-Cookie" not in response


def test_readyz_is_200_when_the_database_and_its_migrations_are_there(settings):
    response = Client(HTTP_HOST="10.0.0.7").get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        # The test settings run tasks in process, as the demo does.
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "broker": "not used (tasks run in process)",
        },
    }


def test_probes_over_plain_http_are_not_redirected_to_https(settings):
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/admin/login/").status_code == 301  # the rest is redirected


def test_only_get_and_head(settings):
    response = Client().post("/readyz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_a_check_that_never_answers_is_a_503_at_the_bound(settings, monkeypatch):
    settings.GARANTE_READY_TIMEOUT_SECONDS = 0.3
    release = threading.Event()

    def frozen() -> dict[str, str]:
        release.wait(5)
        return {"broker": "ok"}

    monkeypatch.setitem(health.CHECKS, ("broker",), frozen)
    started = time.monotonic()
    try:
        response = Client().get("/readyz")
    finally:
        release.set()
    assert time.monotonic() - started < 1
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "broker": "no answer within 0.3 s",
    }


def test_unapplied_migrations_are_named(monkeypatch):
    monkeypatch.setattr(health._migrated, "is_set", lambda: False)
    monkeypatch.setattr(
        "django.db.migrations.executor.MigrationExecutor.migration_plan",
        lambda self, targets: [("a migration", False)] * 2,
    )
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == "2 not applied"


# Against a real server, the services really down -------------------------------------------


@contextmanager
def black_hole() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a frozen database, a paused
    proxy in front of it)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def production_env(broker_port: int | None = None) -> dict[str, str]:
    """config.settings with a real broker (not the test settings' in-process tasks)."""
    return {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "CELERY_BROKER_URL": f"redis://127.0.0.1:{broker_port or 6379}/0",
    }


def timed_readyz(url: str) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    response = httpx.get(f"{url}/readyz", timeout=10)
    return time.monotonic() - started, response


@pytest.mark.redis
@pytest.mark.postgres
def test_readyz_on_a_real_server_with_the_broker_is_200(gunicorn_server):
    server = gunicorn_server(workers=1, env=production_env())
    elapsed, response = timed_readyz(server.url)
    assert response.status_code == 200, response.text
    assert elapsed < 2
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "ok"}


@pytest.mark.redis
def test_readyz_with_the_database_refusing_connections_is_503_at_once(gunicorn_server):
    server = gunicorn_server(
        workers=1,
        database_url=f"postgres://postgres@127.0.0.1:{free_port()}/garante",
        env=production_env(),
    )
    elapsed, response = timed_readyz(server.url)
    assert response.status_code == 503
    assert elapsed < 2
    body = response.json()
    assert body == {
        "status": "unavailable",
        "checks": {"database": "unreachable", "migrations": "not checked", "broker": "ok"},
    }
    assert "127.0.0.1" not in response.text and "postgres" not in response.text


@pytest.mark.redis
def test_readyz_with_a_database_that_never_answers_is_503_within_2_seconds(gunicorn_server):
    with black_hole() as port:
        server = gunicorn_server(
            workers=1,
            database_url=f"postgres://postgres@127.0.0.1:{port}/garante",
            env=production_env(),
        )
        for _ in range(3):  # again while the first probes' checks still hang
            elapsed, response = timed_readyz(server.url)
            assert response.status_code == 503
            assert elapsed < 2, elapsed
            assert response.json()["checks"]["database"] == "no answer within 1.5 s"
        assert httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200


@pytest.mark.postgres
def test_readyz_with_the_broker_down_is_503_naming_it(gunicorn_server):
    server = gunicorn_server(workers=1, env=production_env(broker_port=free_port()))
    elapsed, response = timed_readyz(server.url)
    assert response.status_code == 503
    assert elapsed < 2
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "broker": "unreachable",
    }
    assert "redis" not in response.text


def test_readyz_on_a_database_never_migrated_names_the_migrations(gunicorn_server, tmp_path):
    empty = Path(tmp_path) / "empty.sqlite3"
    server = gunicorn_server(workers=1, database_url=f"sqlite:///{empty}")
    response = httpx.get(f"{server.url}/readyz", timeout=10)
    assert response.status_code == 503
    checks = json.loads(response.text)["checks"]
    assert checks["database"] == "ok"
    assert checks["migrations"].endswith(" not applied")
    assert int(checks["migrations"].split()[0]) > 10
