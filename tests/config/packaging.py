"""CI's packaging step: what the container image runs, run on the host (.ci/run).

Docker cannot run on our machines, so the image's entrypoint, bin/garante, is run here with
the environment compose.yaml gives it (tests/config/compose_env.py), the compose network's
hosts replaced by the local PostgreSQL and Redis: `collectstatic` (the image's build step),
`migrate` (the one-shot service), then `web`, `worker` and `beat` together. It checks what
compose's health checks and an operator rely on, and stops everything again:

- the web answers /healthz, and /readyz with every check ok (database, migrations, broker);
- behind the proxy compose.yaml expects (X-Forwarded-Proto), the admin's login page is
  served, and plain HTTP is redirected to HTTPS; WhiteNoise serves the collected files;
- the worker answers a Celery ping through the broker, and `bin/garante ready` (the worker's
  and beat's health check) exits 0;
- beat starts and writes its schedule file;
- a verification code asked for through the web leaves the worker by email, to the SMTP
  server the operator's EMAIL_HOST and EMAIL_PORT name (a local one here), and is marked sent.

    python -m tests.config.packaging     # DATABASE_URL names the PostgreSQL server to use
"""

import email
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
from aiosmtpd.controller import Controller

from tests.config.compose_env import garante_environment
from tests.script_support import scratch_database, stop_process

ROOT = Path(__file__).resolve().parent.parent.parent
GARANTE = str(ROOT / "bin" / "garante")
WORK = ROOT / "var" / "packaging"
READY_SECONDS = 60
REDIS_DB = 12


class PackagingFailed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(env: dict[str, str], *arguments: str, timeout: float = 300) -> str:
    done = subprocess.run(
        arguments, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise PackagingFailed(f"{' '.join(arguments)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextmanager
def process(env: dict[str, str], name: str, *arguments: str) -> Iterator[Path]:
    """`bin/garante <arguments>` in the background, its output in var/packaging/<name>.log."""
    log_path = WORK / f"{name}.log"
    with open(log_path, "wb") as log:
        started = subprocess.Popen(
            [GARANTE, *arguments],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield log_path
    finally:
        stop_process(started)


def wait_for(what: str, check, log_path: Path, seconds: float = READY_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except (httpx.TransportError, PackagingFailed):
            pass  # not up yet
        time.sleep(0.3)
    raise PackagingFailed(f"{what}: not within {seconds} s\n{log_path.read_text()[-4000:]}")


def check_web(url: str, host: str, log_path: Path) -> None:
    behind_proxy = {"Host": host, "X-Forwarded-Proto": "https"}
    with httpx.Client(base_url=url, timeout=5) as http:
        wait_for("/healthz", lambda: http.get("/healthz").status_code == 200, log_path)
        ready = wait_for(
            "/readyz 200", lambda: (r := http.get("/readyz")).status_code == 200 and r, log_path
        )
        checks = ready.json()["checks"]
        if set(checks.values()) != {"ok"}:
            raise PackagingFailed(f"/readyz: {checks}")
        login = http.get("/admin/login/", headers=behind_proxy)
        if login.status_code != 200 or "csrfmiddlewaretoken" not in login.text:
            raise PackagingFailed(f"admin login page behind the proxy: {login.status_code}")
        plain = http.get("/admin/login/", headers={"Host": host})
        if plain.status_code != 301 or not plain.headers["location"].startswith("https://"):
            raise PackagingFailed(f"plain HTTP was not redirected: {plain.status_code}")
        css = http.get("/static/admin/css/base.css", headers=behind_proxy)
        if css.status_code != 200 or "text/css" not in css.headers.get("content-type", ""):
            raise PackagingFailed(f"WhiteNoise did not serve the admin's CSS: {css.status_code}")


class Inbox:
    """An aiosmtpd handler keeping the messages it accepts."""

    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted"


@contextmanager
def smtp_server() -> Iterator[tuple[int, Inbox]]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.port, inbox
    finally:
        controller.stop()


def check_email_code(
    env: dict[str, str], url: str, host: str, database_url: str, inbox: Inbox, log_path: Path
) -> None:
    """A code asked for through the web, for the seeded company's Bruno by email (the company
    made a production one): the worker hands it to the SMTP server and marks it sent."""
    seeded = run(env, GARANTE, "manage", "seed_sandbox", "--base-url", f"https://{host}")
    token = re.search(r"Gateway token:\s+(\S+)", seeded)
    if token is None:
        raise PackagingFailed(f"seed_sandbox printed no token:\n{seeded}")
    with psycopg.connect(database_url, autocommit=True) as connection:
        # A sandbox's messages stay in its outbox: the operator's company here sends for real.
        connection.execute(
            "UPDATE core_company SET environment = 'production' WHERE slug = 'sandbox'"
        )
    conversation = f"packaging-{uuid.uuid4().hex[:8]}"
    headers = {
        "Host": host,
        "X-Forwarded-Proto": "https",
        "Authorization": f"Bearer {token.group(1)}",
        "X-Conversation-Id": conversation,
    }
    bruno = "bruno@example.com"
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        for name, body in [
            ("identify_contact", {"email": bruno}),
            ("request_verification_code", {"identifier": bruno, "channel": "email"}),
        ]:
            answer = http.post(
                f"/api/tools/{name}", json=body, headers={"Idempotency-Key": uuid.uuid4().hex}
            )
            if answer.status_code != 200:
                raise PackagingFailed(f"{name}: {answer.status_code} {answer.text}")

    def delivered() -> tuple[str, str] | None:
        with psycopg.connect(database_url) as connection:
            row = connection.execute(
                "SELECT c.delivery_status, c.provider_message_id"
                " FROM core_verificationchallenge c JOIN core_conversation v"
                " ON v.id = c.conversation_id WHERE v.external_id = %s",
                (conversation,),
            ).fetchone()
        return row if row and row[0] == "sent" else None

    _status, message_id = wait_for("the code marked sent", delivered, log_path)
    received = [(m["To"], m["Message-ID"]) for m in inbox.messages]
    if received != [(bruno, message_id)]:
        raise PackagingFailed(f"the SMTP server received {received}, not the code's message")


def main() -> int:
    server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    if not server.startswith("postgres"):
        raise SystemExit("the packaging check needs PostgreSQL (DATABASE_URL), as compose runs")
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    port = free_port()
    host = "garante.example.com"
    with ExitStack() as stack:
        # Named after DATABASE_URL's database, so that runs of several checkouts stay apart.
        named = urlsplit(server).path.lstrip("/")
        database_url = stack.enter_context(
            scratch_database(server, f"{named or 'garante'}_packaging")
        )
        smtp_port, inbox = stack.enter_context(smtp_server())
        # What an operator's .env provides, and the compose network's hosts and the image's
        # paths replaced by this machine's.
        operator = {
            "POSTGRES_PASSWORD": "unused-on-the-host",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_ALLOWED_HOSTS": f"{host},127.0.0.1,localhost",
            "DJANGO_CSRF_TRUSTED_ORIGINS": f"https://{host}",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(smtp_port),
        }
        overrides = {
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
            "GARANTE_BEAT_SCHEDULE": str(WORK / "beat" / "celerybeat-schedule"),
            "GARANTE_WEB_BIND": f"127.0.0.1:{port}",
            "GARANTE_WEB_WORKERS": "1",
            "GARANTE_WEB_THREADS": "2",
            "DJANGO_STATIC_ROOT": str(WORK / "static"),
            "GARANTE_SMS_BACKEND": "console",
            # A queue of this run's own on the shared Redis: no other run's worker takes its
            # tasks.
            "GARANTE_CELERY_QUEUE": f"packaging-{uuid.uuid4().hex[:8]}",
        }
        compose = garante_environment(operator, overrides)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONUNBUFFERED": "1",
            **compose,
        }
        started = time.monotonic()
        run(env, str(ROOT / ".venv" / "bin" / "python"), "manage.py", "collectstatic",
            "--no-input", "-v", "0")  # fmt: skip
        run(env, GARANTE, "migrate")
        web = stack.enter_context(process(env, "web", "web"))
        worker = stack.enter_context(process(env, "worker", "worker", "--pool=solo"))
        beat = stack.enter_context(process(env, "beat", "beat"))
        check_web(f"http://127.0.0.1:{port}", host, web)
        wait_for("the worker", lambda: b" ready." in worker.read_bytes(), worker)
        celery = str(ROOT / ".venv" / "bin" / "celery")
        wait_for(
            "a Celery ping answered by the worker",
            lambda: "pong" in run(env, celery, "-A", "config", "inspect", "ping", "-t", "5"),
            worker,
        )
        run(env, GARANTE, "ready")
        check_email_code(env, f"http://127.0.0.1:{port}", host, database_url, inbox, worker)
        schedule = WORK / "beat"
        wait_for(
            "beat's schedule file",
            lambda: any(schedule.glob("celerybeat-schedule*")),
            beat,
        )
        print(
            f"packaging: migrate, web, worker and beat ran from bin/garante with compose.yaml's "
            f"environment, and an email code left by SMTP ({time.monotonic() - started:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PackagingFailed as failure:
        print(f"FAILED packaging: {failure}", file=sys.stderr)
        sys.exit(1)
