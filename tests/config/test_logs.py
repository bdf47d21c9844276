"""Log lines: one JSON line per request, which for a tool call's request is the call's line
too, and one per tool call run outside a request; each with the request id (the caller's when
well-formed, answered back), the company, the tool, the conversation, the outcome and the
duration; never a token, a code, a full phone, an email or a document number. Plain lines
stay the default; error reports to Sentry carry none of the same."""

import json
import logging
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from django.test import Client

from core.services import contact_create
from tests.factories import ANA_DOCUMENT, ANA_PHONE, ANA_PHONE_NATIONAL
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT, PHONE, EMAIL = ANA_DOCUMENT, ANA_PHONE_NATIONAL, "ana.garcia@example.com"
# What a caller may send that must never be written: identifiers in the shapes a customer
# gives them, and a conversation id that is a phone number (some gateways use one).
PERSONAL = [DOCUMENT, "12.345.678-Z", PHONE, "600 111 222", ANA_PHONE, EMAIL, "ana.garcia"]


@pytest.fixture
def ana(company):
    return contact_create(
        company=company,
        first_name="Ana",
        last_name="García",
        document_number=DOCUMENT,
        phone=PHONE,
        email=EMAIL,
    )


def rest(token: str, name: str, arguments: dict, *, conversation: str, **headers: str):
    return Client().post(
        f"/api/tools/{name}",
        data=json.dumps(arguments),
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "X-Conversation-Id": conversation,
            "Idempotency-Key": uuid.uuid4().hex,
            **headers,
        },
    )


@pytest.mark.django_db
def test_a_tool_calls_request_is_one_line_naming_the_call_under_the_callers_request_id(
    json_lines, company, token
):
    response = rest(
        token,
        "testapp_increment_counter",
        {"name": "visits"},
        conversation="conv-7",
        **{"X-Request-ID": "gw-4f2a.77:1"},
    )

    assert response.status_code == 200
    assert response["X-Request-ID"] == "gw-4f2a.77:1"
    [line] = json_lines.all()
    assert line["event"] == "tool_call" and line["request_id"] == "gw-4f2a.77:1"
    assert line["logger"] == "garante.requests" and line["level"] == "INFO"
    assert {
        k: line[k]
        for k in ("company", "tool", "surface", "conversation_id", "outcome", "method", "path")
    } == {
        "company": company.pk,
        "tool": "testapp_increment_counter",
        "surface": "rest",
        "conversation_id": "conv-7",
        "outcome": "ok",
        "method": "POST",
        "path": "/api/tools/testapp_increment_counter",
    }
    assert (line["status"], line["error_type"], line["replayed"]) == (200, None, False)
    assert 0 < line["tool_duration_ms"] <= line["duration_ms"]
    assert "time" in line and "testapp_increment_counter" in line["message"]


@pytest.mark.django_db
def test_a_request_without_a_tool_call_is_one_request_line(json_lines, token):
    response = Client().get("/api/ping", headers={"X-Request-ID": "lb-1"})

    assert response["X-Request-ID"] == "lb-1"
    [line] = json_lines.all()
    assert (line["event"], line["request_id"], line["status"]) == ("request", "lb-1", 200)
    assert (line["method"], line["path"], line["surface"]) == ("GET", "/api/ping", "other")
    assert "tool" not in line and line["duration_ms"] > 0


@pytest.mark.django_db
def test_a_tool_call_outside_a_request_writes_its_own_line(json_lines, company):
    meta = CallMeta(conversation_id="conv-9", idempotency_key="k-9")
    tool = registry.get("testapp_increment_counter")

    call_tool(tool, company=company, arguments={"name": "visits"}, meta=meta, surface="mcp")

    [line] = json_lines.all()
    assert line["logger"] == "garante.tools" and "request_id" not in line
    assert {k: line[k] for k in ("event", "company", "tool", "surface", "outcome")} == {
        "event": "tool_call",
        "company": company.pk,
        "tool": "testapp_increment_counter",
        "surface": "mcp",
        "outcome": "ok",
    }
    assert line["duration_ms"] == line["tool_duration_ms"] > 0


@pytest.mark.django_db
def test_a_failed_call_says_how_it_ended(json_lines, company, token):
    response = rest(
        token,
        "testapp_fail_after_write",
        {"name": "visits", "failure": "business"},
        conversation="conv-8",
    )

    assert response.status_code == 422
    [call] = json_lines.events("tool_call")
    assert (call["outcome"], call["error_type"], call["error_code"], call["status"]) == (
        "error",
        "VALIDATION",
        "counter_full",
        422,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "given",
    [
        "has spaces",
        "x" * 129,
        "semi;colon",
        "quote\"'",
        "juan@example.com",
        "",
    ],
)
def test_a_malformed_request_id_is_replaced_and_never_echoed(json_lines, token, given):
    response = Client().get("/api/ping", headers={"X-Request-ID": given})

    assert response.status_code == 200
    answered = response["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", answered)
    [line] = json_lines.events("request")
    assert line["request_id"] == answered
    if given:
        assert given not in json_lines.text


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("given", "written"),
    [("Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8", "[token]"), ("call:600111222", "call:[number]")],
)
def test_a_well_formed_request_id_is_answered_as_sent_and_written_masked(
    json_lines, given, written
):
    # The request line is masked by its writer (core.request_log), not by core.logs: a caller's
    # id shaped like a credential or holding a phone number is answered back, never written.
    response = Client().get("/api/ping", headers={"X-Request-ID": given})

    assert response["X-Request-ID"] == given
    [line] = json_lines.events("request")
    assert line["request_id"] == written
    assert given not in json_lines.text


@pytest.mark.django_db
def test_each_request_gets_an_id_of_its_own(json_lines):
    ids = {Client().get("/api/ping")["X-Request-ID"] for _ in range(3)}

    assert len(ids) == 3
    assert {line["request_id"] for line in json_lines.events("request")} == ids


@pytest.mark.django_db
def test_no_token_code_phone_email_or_document_reaches_the_log_lines(
    json_lines, company, token, ana
):
    conversation = "whatsapp:+34600111222"
    calls = [
        ("identify_contact", {"document": "12.345.678-Z"}),
        ("identify_contact", {"phone": "600 111 222"}),
        ("identify_contact", {"email": EMAIL}),
        ("verify_code", {"identifier": DOCUMENT, "code": "482913"}),
        ("update_contact_details", {"identifier": DOCUMENT, "email": "nueva.ana@example.org"}),
        ("identify_contact", {"document": DOCUMENT, "extra": "juan@example.com 600999888"}),
    ]
    answers = [rest(token, name, args, conversation=conversation) for name, args in calls]
    # A mail server's refusal quoted in a warning, and a failure logged with its traceback.
    logging.getLogger("garante.verification").warning(
        "verification code 7: delivery refused 550 5.1.1 <%s> unknown, Bearer %s", EMAIL, token
    )
    try:
        raise ValueError(f"no contact with phone {PHONE} or document {DOCUMENT}")
    except ValueError:
        logging.getLogger("garante.tools").exception("unexpected failure in tool x")

    assert [a.status_code for a in answers][:3] == [200, 200, 200]
    text = json_lines.text
    assert len(json_lines.events("tool_call")) == len(calls)
    for secret in [*PERSONAL, token, token[3:], "482913", "nueva.ana", "600999888", "juan@"]:
        assert secret not in text, secret
    assert "[email]" in text and "[number]" in text and "[token]" in text
    conversations = {line["conversation_id"] for line in json_lines.events("tool_call")}
    assert conversations == {"whatsapp:[number]"}


def _settings_in_a_new_process(env: dict[str, str]) -> subprocess.CompletedProcess:
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.LOGGING['handlers']['console']['formatter'])"
    )
    environment = {k: v for k, v in os.environ.items() if k != "GARANTE_LOG_FORMAT"}
    environment.update({"DJANGO_SETTINGS_MODULE": "config.settings", **env})
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plain_lines_are_the_default_and_json_is_chosen_by_the_environment():
    assert _settings_in_a_new_process({}).stdout.strip() == "plain"
    assert _settings_in_a_new_process({"GARANTE_LOG_FORMAT": "json"}).stdout.strip() == "json"
    refused = _settings_in_a_new_process({"GARANTE_LOG_FORMAT": "xml"})
    assert refused.returncode != 0
    assert "GARANTE_LOG_FORMAT must be plain or json" in refused.stderr


SENTRY_SCRIPT = f"""
import json, logging, sys
from sentry_sdk.transport import Transport
from config.sentry import sentry_init

sent = []

class Keep(Transport):
    def capture_envelope(self, envelope):
        sent.append(envelope.serialize().decode())

sentry_init(dsn="https://key@sentry.invalid/1", environment="test", transport=Keep)
import sentry_sdk

def failing(phone, code, token):
    raise ValueError("no contact with phone {PHONE}, email {EMAIL}, document {DOCUMENT}")

with sentry_sdk.new_scope() as scope:
    scope.set_extra("arguments", {{"email": "{EMAIL}", "note": "call +34600111222"}})
    scope.set_tag("conversation", "whatsapp:+34600111222")
    try:
        failing("{PHONE}", "482913", sys.argv[1])
    except ValueError:
        sentry_sdk.capture_exception()
logging.getLogger("garante").error(
    "delivery refused for %s with Bearer %s", "{EMAIL}", sys.argv[1]
)
sentry_sdk.flush()
print(json.dumps(sent))
"""


def test_error_reports_to_sentry_carry_no_personal_data_or_secret():
    token = "gt_" + "s3cr3tTOKENvalue" * 2
    done = subprocess.run(
        [sys.executable, "-c", SENTRY_SCRIPT, token],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    envelopes = json.loads(done.stdout.strip().splitlines()[-1])
    text = "\n".join(envelopes)
    assert len(envelopes) == 2  # the exception and the error logged
    assert "ValueError" in text and "delivery refused" in text
    for secret in [PHONE, ANA_PHONE_NATIONAL, EMAIL, DOCUMENT, "482913", token, "s3cr3t"]:
        assert secret not in text, secret
    assert "[email]" in text and "[number]" in text


def test_a_real_server_writes_json_lines_with_request_ids_and_nothing_personal(
    gunicorn_server, company, token, ana, tmp_path
):
    sms = tmp_path / "sms"
    server = gunicorn_server(
        workers=2,
        threads=2,
        env={
            "GARANTE_LOG_FORMAT": "json",
            "GARANTE_LOG_LEVEL": "INFO",
            "GARANTE_SMS_BACKEND": "file",
            "GARANTE_SMS_FILE_PATH": str(sms),
        },
    )
    conversation = "whatsapp:+34600111222"
    headers = {"Authorization": f"Bearer {token}", "X-Conversation-Id": conversation}

    def call(http, name: str, arguments: dict, request_id: str | None = None):
        sent = {**headers, "Idempotency-Key": uuid.uuid4().hex}
        if request_id is not None:
            sent["X-Request-ID"] = request_id
        return http.post(f"/api/tools/{name}", json=arguments, headers=sent)

    with httpx.Client(base_url=server.url, timeout=30) as http:
        answers = [
            call(http, "identify_contact", {"document": "12.345.678-Z"}, "gw-1"),
            call(http, "request_verification_code", {"identifier": PHONE, "channel": "sms"}),
        ]
        code = re.search(r"\b(\d{6})\b", next(sms.glob("*.sms")).read_text()).group(1)
        answers.append(call(http, "verify_code", {"identifier": EMAIL, "code": code}, "bad id"))
        answers.append(
            http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {
                        "name": "identify_contact",
                        "arguments": {"phone": "600 111 222"},
                        "_meta": {
                            "com.asixto/conversationId": conversation,
                            "com.asixto/idempotencyKey": "k-mcp",
                        },
                    },
                },
                headers={"Authorization": f"Bearer {token}"},
            )
        )
    assert [a.status_code for a in answers] == [200] * 4
    assert answers[2].json()["verified"] is True
    server.stop()  # every worker's lines written out

    log = server.log()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    calls = [line for line in lines if line.get("event") == "tool_call"]
    answered_ids = [a.headers["X-Request-ID"] for a in answers]
    assert answered_ids[0] == "gw-1" and answered_ids[2] != "bad id"
    assert [c["request_id"] for c in calls] == answered_ids
    assert [c["path"] for c in calls] == [
        "/api/tools/identify_contact",
        "/api/tools/request_verification_code",
        "/api/tools/verify_code",
        "/mcp",
    ]
    # The readiness polls of tests/servers.py: requests without a tool call, one line each.
    assert any(line.get("event") == "request" and line["path"] == "/api/ping" for line in lines)
    assert {c["tool"] for c in calls} == {
        "identify_contact",
        "request_verification_code",
        "verify_code",
    }
    assert all(c["company"] == company.pk and c["outcome"] == "ok" for c in calls)
    assert {c["conversation_id"] for c in calls} == {"whatsapp:[number]"}
    for secret in [*PERSONAL, token, token[3:], code, "bad id"]:
        assert secret not in log, secret
