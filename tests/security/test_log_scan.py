"""The log scan: a whole conversation with the declared sandbox, through a real gunicorn, a real
Celery worker and a real beat, all three writing JSON lines (GARANTE_LOG_FORMAT=json), and then
every line each wrote is searched for the sandbox's phones (in any format), emails and document
numbers, the codes the worker sent, the gateway token and the signed links of the messages. An
attacker who reads the logs must learn none of them; an operator must still find the task ids,
the durations, the request ids and the counts."""

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from datetime import date, timedelta
from email.message import Message
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.core.management import call_command

from core.management.commands.seed_sandbox import CONTACTS
from core.models import Company, OutboxMessage
from integration.services import integration_credential_issue
from tests.factories import ANA_EMAIL, ANA_PHONE, BRUNO_DOCUMENT, BRUNO_EMAIL, BRUNO_PHONE
from tests.servers import (
    ROOT,
    database_url_of_current_connection,
    start_mail_worker,
    task_log,
    wait_for,
)

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

REDIS_DB = 15  # this module's own Redis database: no other session's worker sees its queues
JSON_LOGS = {"GARANTE_LOG_FORMAT": "json", "GARANTE_LOG_LEVEL": "INFO"}
# The worker writes its links with this address; the test follows them on the real server.
PUBLIC_URL = "https://citas.example.com"
NEW_EMAIL = "bruno.nuevo@example.org"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# Celery's trace line for a task that ended well: its name, its id and how long it ran.
SUCCEEDED = re.compile(rf"Task (?P<name>[\w.]+)\[(?P<id>{UUID})\] succeeded in (?P<s>\d+\.\d+)s")
# A task's name -> how many of its runs the conversation below causes.
TASKS = {
    # Bruno's code by SMS, the code to his new address, Ana's by email.
    "core.challenge_deliver": 3,
    "agenda.appointment_message_send": 1,  # Bruno's booking's confirmation, by SMS
    "core.tasks.contact_change_notify": 1,  # Bruno's old email told of the change
}


def spaced(value: str) -> re.Pattern[str]:
    """`value` written with or without a separator between any two characters (600 333 444,
    600-333-444, 12.345.678-Z), in any case."""
    return re.compile(r"[\s.()/-]?".join(re.escape(c) for c in value), re.IGNORECASE)


def personal_patterns() -> dict[str, re.Pattern[str]]:
    """What identifies the sandbox's customers, as a log line might write it."""
    found: dict[str, re.Pattern[str]] = {}
    for contact in CONTACTS:
        national = contact["phone"].removeprefix("+34")
        found[contact["phone"]] = spaced(national)  # also inside +34..., 0034..., 34...
        found[contact["document_number"]] = spaced(contact["document_number"])
    for email in [*(c["email"] for c in CONTACTS), NEW_EMAIL]:
        for written in (email, email.replace("@", "%40")):
            found[written] = re.compile(re.escape(written), re.IGNORECASE)
    return found


# Outboxes ----------------------------------------------------------------------------------


def kept(company: Company, channel: str) -> list[tuple[str, str]]:
    """(destination, text) of every message of `channel` the sandbox kept in its outbox, which
    its messages reach instead of any real channel (core.outbound)."""
    rows = OutboxMessage.objects.filter(company=company, channel=channel).order_by("pk")
    return list(rows.values_list("destination", "body"))


def email_text(message: Message) -> str:
    part = next(p for p in message.walk() if p.get_content_type() == "text/plain")
    return part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")


def code_in(text: str) -> str:
    return re.search(r"código (?:de verificación )?es (\d{6})", text).group(1)


def links_in(text: str) -> list[str]:
    return re.findall(r"https?://\S+", text)


# Processes ---------------------------------------------------------------------------------


def beat_run(*, database_url: str, broker_url: str, directory: Path) -> str:
    """What `celery -A config beat` writes, with JSON lines, until it first goes to sleep."""
    log = directory / "beat.log"
    env = {
        **os.environ,
        **JSON_LOGS,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
    }
    env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    command = [
        str(Path(sys.executable).parent / "celery"),
        "-A",
        "config",
        "beat",
        "--loglevel=DEBUG",
        "--schedule",
        str(directory / "beat-schedule"),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: process.poll() is not None or b"Waking up" in log.read_bytes(), 60)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return log.read_text(errors="replace")


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# The conversation ----------------------------------------------------------------------------


class Gateway:
    """The agent platform's calls over HTTP: the REST mirror and MCP, with the sandbox's token."""

    def __init__(self, http: httpx.Client, token: str) -> None:
        self.http = http
        self.token = token

    def rest(self, name: str, arguments: dict, conversation: str) -> dict:
        response = self.http.post(
            f"/api/tools/{name}",
            json=arguments,
            headers={
                "Authorization": f"Bearer {self.token}",
                "X-Conversation-Id": conversation,
                "Idempotency-Key": uuid.uuid4().hex,
            },
        )
        assert response.status_code == 200, (name, response.text)
        return response.json()

    def mcp(self, name: str, arguments: dict, conversation: str) -> dict:
        response = self.http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": name,
                    "arguments": arguments,
                    "_meta": {
                        "com.asixto/conversationId": conversation,
                        "com.asixto/idempotencyKey": uuid.uuid4().hex,
                    },
                },
            },
            headers={"Authorization": f"Bearer {self.token}"},
        )
        assert response.status_code == 200, (name, response.text)
        return response.json()["result"]


def test_no_log_line_of_a_whole_conversation_holds_personal_data_codes_tokens_or_links(
    gunicorn_server, tmp_path
):
    seeded = StringIO()
    call_command("seed_sandbox", stdout=seeded)
    token = re.search(r"Gateway token: (\S+)", seeded.getvalue()).group(1)
    sandbox = Company.objects.get(slug="sandbox")
    _, integration_token = integration_credential_issue(company=sandbox, name="ERP")
    database_url = database_url_of_current_connection()
    outbox = tmp_path / "sms"

    with start_mail_worker(
        database_url=database_url,
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        env={
            **JSON_LOGS,
            "GARANTE_SMS_BACKEND": "file",
            "GARANTE_SMS_FILE_PATH": str(outbox),
            "GARANTE_PUBLIC_URL": PUBLIC_URL,
        },
    ) as (worker, _inbox):
        server = gunicorn_server(
            workers=2,
            env={
                **JSON_LOGS,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "CELERY_TASK_ALWAYS_EAGER": "0",
                "CELERY_BROKER_URL": worker.broker_url,
                "GARANTE_CELERY_QUEUE": worker.queue,
                "GARANTE_PUBLIC_URL": PUBLIC_URL,
            },
        )
        with httpx.Client(base_url=server.url, timeout=30) as http:
            gateway = Gateway(http, token)
            bruno = "whatsapp:+34600333444"  # some gateways name a conversation by the phone
            gateway.rest("identify_contact", {"phone": "600 333 444"}, bruno)
            gateway.rest(
                "request_verification_code", {"identifier": BRUNO_DOCUMENT, "channel": "sms"}, bruno
            )
            [text] = wait_for(
                lambda: [text for _, text in kept(sandbox, "sms") if "código" in text]
            )
            bruno_code = code_in(text)
            gateway.rest("verify_code", {"identifier": BRUNO_PHONE, "code": bruno_code}, bruno)
            tomorrow = (date.today() + timedelta(days=1)).isoformat()
            slots = gateway.rest(
                "find_available_slots", {"service": "Corte de pelo", "from": tomorrow}, bruno
            )
            gateway.rest(
                "book_appointment",
                {
                    "identifier": BRUNO_EMAIL,
                    "service": "Corte de pelo",
                    "slot": slots["items"][0]["slot"],
                },
                bruno,
            )
            gateway.rest(
                "update_contact_details", {"identifier": BRUNO_DOCUMENT, "email": NEW_EMAIL}, bruno
            )
            # The new address proves itself with the code sent to it; the old one is told.
            change_mail = wait_for(
                lambda: [text for to, text in kept(sandbox, "email") if to == NEW_EMAIL]
            )
            change_code = code_in(change_mail[0])
            confirmed = gateway.rest(
                "confirm_contact_change", {"identifier": BRUNO_DOCUMENT, "code": change_code}, bruno
            )
            assert confirmed.get("updated") is True, confirmed

            ana = "conv-ana-1"
            identified = gateway.mcp("identify_contact", {"email": "ANA@example.com"}, ana)
            assert identified["isError"] is False, identified
            sent = gateway.mcp(
                "request_verification_code", {"identifier": "12.345.678-Z", "channel": "email"}, ana
            )
            assert sent["isError"] is False, sent
            ana_mail = wait_for(
                lambda: [
                    text
                    for to, text in kept(sandbox, "email")
                    if to == ANA_EMAIL and "verificación" in text
                ]
            )
            ana_code = code_in(ana_mail[0])
            wrong = gateway.mcp(
                "verify_code", {"identifier": "+34 600 111 222", "code": "000000"}, ana
            )
            assert wrong["isError"] is True
            verified = gateway.mcp(
                "verify_code", {"identifier": "+34 600 111 222", "code": ana_code}, ana
            )
            assert verified["isError"] is False, verified

            # Every task the conversation caused has run: the confirmation with its link (the
            # second SMS), the notice to Bruno's old address (an email).
            for name, runs in TASKS.items():
                wait_for(lambda n=name, r=runs: task_log(worker, n).count("succeeded") >= r, 60)
            texts = [text for _, text in kept(sandbox, "sms") + kept(sandbox, "email")]
            links = [link for text in texts for link in links_in(text)]
            assert links, texts  # the confirmation ends with its opt-out link

            # The company's other systems search by an email and a phone in the query string,
            # with their token and without; a link scanner follows the opt-out link, and so
            # does somebody who altered it; the customer opts out.
            query = {"email": BRUNO_EMAIL, "phone": ANA_PHONE}
            searched = [
                http.get("/api/v1/contacts", params=query, headers=headers).status_code
                for headers in (
                    {"Authorization": f"Bearer {integration_token}"},
                    {"Authorization": "Bearer gi_wrong"},
                    {},
                )
            ]
            assert searched == [200, 401, 401]
            path = urlsplit(next(link for link in links if "/opt-out/" in link)).path
            assert http.get(path).status_code == 200
            assert http.get(path[:-3] + "xyz").status_code == 404
            assert http.post(path).status_code == 200
            # The link to manage the appointment (agenda.manage_links), opened and altered.
            manage = urlsplit(next(link for link in links if "/a/" in link)).path
            assert http.get(manage).status_code == 200
            assert http.get(manage + "/move").status_code == 200
            assert http.get(manage[:-3] + "xyz").status_code == 404
        beat = beat_run(database_url=database_url, broker_url=worker.broker_url, directory=tmp_path)
        server.stop()  # every gunicorn worker's lines written out
    logs = {
        "gunicorn": server.log(),
        "worker": worker.log.read_text(errors="replace"),
        "beat": beat,
    }

    never_written = {
        **personal_patterns(),
        "Bruno's code": re.compile(rf"(?<!\d){bruno_code}(?!\d)"),
        "Ana's code": re.compile(rf"(?<!\d){ana_code}(?!\d)"),
        "the gateway token": re.compile(re.escape(token[10:])),
        "the integration token": re.compile(re.escape(integration_token[10:])),
        # Whatever shape a link has: its credential is what follows the route's prefix.
        "an opt-out link": re.compile(r"opt-out/(?!\[)"),
        "a manage link": re.compile(r"/a/(?!\[)[A-Za-z0-9_-]{8}"),
    }
    for link in links:
        credential = urlsplit(link).path.rsplit("/", 1)[1]
        never_written[link] = re.compile(re.escape(credential[-20:]))
    leaks = [
        f"{process}: {what}: {line[:300]}"
        for process, text in logs.items()
        for line in text.splitlines()
        for what, pattern in never_written.items()
        if pattern.search(line)
    ]
    assert not leaks, "\n".join(leaks)

    # Each process wrote its log lines as JSON: none in Celery's own format ("[2026-12-07
    # 10:00:00,123: INFO/MainProcess] ..."); what is not JSON is the banners Celery prints to
    # stdout and Python's warnings before logging is set up.
    worker_lines = json_lines(logs["worker"])
    assert any(line["message"].endswith(" ready.") for line in worker_lines)
    assert any(line["logger"] == "celery.beat" for line in json_lines(logs["beat"]))
    for name, text in logs.items():
        assert not re.search(r"^\[\d{4}-\d\d-\d\d [\d:,]+: \w+/", text, re.MULTILINE), name
    naming_a_task = [line for line in logs["worker"].splitlines() if "Task " in line]
    assert naming_a_task and all(line.startswith("{") for line in naming_a_task)

    # What operators need survived: each task's id and duration, in its message and its data.
    succeeded = [
        (match, line)
        for line in worker_lines
        if (match := SUCCEEDED.search(line["message"])) is not None
    ]
    for name, runs in TASKS.items():
        assert len([m for m, _ in succeeded if m["name"] == name]) >= runs, name
    for match, line in succeeded:
        assert line["data"]["id"] == match["id"]
        assert line["data"]["runtime"] == pytest.approx(float(match["s"]))
        assert float(match["s"]) > 0
    # The lines a task writes while it runs carry its id.
    delivered = [line for line in worker_lines if "delivered by" in line["message"]]
    assert len(delivered) == TASKS["core.challenge_deliver"]
    assert {line["task_id"] for line in delivered} <= {m["id"] for m, _ in succeeded}
    # And each tool call's line its request id, its company and its durations.
    calls = [line for line in json_lines(logs["gunicorn"]) if line.get("event") == "tool_call"]
    assert len(calls) == 11  # confirm_contact_change too
    assert all(re.fullmatch(r"[0-9a-f]{32}", call["request_id"]) for call in calls)
    assert {call["company"] for call in calls} == {sandbox.pk}
    assert all(0 < call["tool_duration_ms"] <= call["duration_ms"] for call in calls)
    assert {call["conversation_id"] for call in calls} == {"whatsapp:[number]", ana}
