"""Verification by link over MCP, as the Gateway plays it against a live server: the agent asks
for a verification, the customer taps the link on their phone, and the agent reads the result
(verification_status, then the protected action goes through), with no code and no link in
any tool call, tool answer, tool-call record or log line."""

import io
import json
import logging
import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.core.cache import caches
from django.forms.models import model_to_dict

from core.logs import JsonFormatter, RequestContextFilter
from core.models import Company, VerificationChallenge
from tests.factories import ANA_DOCUMENT
from tooling.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

Form = Company.VerificationForm


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """Every line the project's JSON formatter writes while the test runs, INFO and up, from
    the project's, Django's and Celery's loggers (on them, not on the root: the first task
    run in the test configures the logging again, and that replaces the root's handlers)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestContextFilter())
    loggers = [logging.getLogger(n) for n in ("garante", "django", "celery")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


@pytest.fixture
def by_link(settings, live_server, company):
    settings.GARANTE_PUBLIC_URL = live_server.url
    company.verification_form_sms = Form.LINK
    company.save()
    caches["shared"].clear()
    return company


def result(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["result"]


def call(mcp, name: str, arguments: dict) -> tuple[bool, dict, str]:
    """(isError, structuredContent, the whole answer's text) of one tools/call."""
    response = mcp.call(name, arguments, key=uuid.uuid4().hex)
    body = result(response)
    return body["isError"], body["structuredContent"], response.text


def tap_on_the_phone(url: str) -> httpx.Response:
    """What the customer's phone does: open the link, then press the page's one button."""
    with httpx.Client(timeout=30, follow_redirects=False) as phone:
        page = phone.get(url)
        assert page.status_code == 200, page.text
        fields = dict(
            re.findall(r'name="(form_token|csrfmiddlewaretoken)" value="([^"]+)"', page.text)
        )
        return phone.post(url, data=fields)


def test_the_agent_verifies_a_customer_by_link_and_never_sees_the_secret(
    by_link, mcp, ana, sms_outbox, log_text
):
    me = {"identifier": ANA_DOCUMENT}
    answers = []

    def agent(name: str, arguments: dict) -> tuple[bool, dict]:
        is_error, content, text = call(mcp, name, arguments)
        answers.append(text)
        return is_error, content

    assert agent("identify_contact", {"document": ANA_DOCUMENT})[0] is False
    change = {**me, "email": "ana.nueva@example.org"}
    is_error, refused = agent("update_contact_details", change)
    assert is_error and refused["code"] == "verification_required"

    is_error, sent = agent("request_verification_code", {**me, "channel": "sms"})
    assert is_error is False
    assert (sent["sent_as"], sent["channel"], sent["sent_to"]) == (
        "link",
        "sms",
        "teléfono terminado en 22",
    )
    assert agent("verification_status", me) == (
        False,
        {"verified": False, "valid_for_minutes": None, "awaiting": "link"},
    )

    (sms,) = sms_outbox
    url = re.search(re.escape(by_link_url(mcp)) + r"/v/\S+", sms.body).group(0)
    tapped = tap_on_the_phone(url)
    assert tapped.status_code == 200 and "Listo, ya está confirmado" in tapped.text

    is_error, status = agent("verification_status", me)
    assert is_error is False and status["verified"] is True and status["awaiting"] is None
    is_error, changed = agent("update_contact_details", change)
    assert is_error is False and changed["updated"] is False  # the new email's own code sent

    token = url.rsplit("/", 1)[1]
    challenge = VerificationChallenge.objects.get(purpose="step_up")
    secrets = [token, token[:24], token[24:], challenge.link_digest]
    records = json.dumps(
        [model_to_dict(c) for c in ToolCall.objects.all()], default=str, ensure_ascii=False
    )
    assert ToolCall.objects.filter(tool="verification_status").count() == 2
    logged = log_text.getvalue()
    assert "/v/[token]" in logged  # the page's requests are logged, the token masked
    for secret in secrets:
        for where, text in (("answers", "\n".join(answers)), ("records", records)):
            assert secret not in text, (where, secret)
        assert secret not in logged, secret
    assert not re.search(r"\b\d{6}\b", sms.body)  # and no code went out at all


def by_link_url(mcp) -> str:
    return mcp.url.removesuffix("/mcp")


def test_a_link_of_another_conversation_verifies_only_its_own(by_link, mcp, ana, sms_outbox):
    me = {"identifier": ANA_DOCUMENT}
    other = f"conv-{uuid.uuid4().hex[:8]}"
    for conversation in (mcp.conversation_id, other):
        response = mcp.call(
            "identify_contact",
            {"document": ANA_DOCUMENT},
            key=uuid.uuid4().hex,
            conversation_id=conversation,
        )
        assert result(response)["isError"] is False
    assert call(mcp, "request_verification_code", {**me, "channel": "sms"})[0] is False

    url = re.search(re.escape(by_link_url(mcp)) + r"/v/\S+", sms_outbox[0].body).group(0)
    assert tap_on_the_phone(url).status_code == 200

    here = call(mcp, "verification_status", me)[1]
    there = result(
        mcp.call("verification_status", me, key=uuid.uuid4().hex, conversation_id=other)
    )["structuredContent"]
    assert here["verified"] is True and there["verified"] is False
    # A code guessed in the other conversation finds none pending there.
    guessed = result(
        mcp.call(
            "verify_code", {**me, "code": "123456"}, key=uuid.uuid4().hex, conversation_id=other
        )
    )
    assert guessed["isError"] and guessed["structuredContent"]["code"] == "no_code_pending"


def test_with_a_link_pending_verify_code_says_so(by_link, mcp, ana, sms_outbox):
    me = {"identifier": ANA_DOCUMENT}
    call(mcp, "identify_contact", {"document": ANA_DOCUMENT})
    call(mcp, "request_verification_code", {**me, "channel": "sms"})

    is_error, answer, _text = call(mcp, "verify_code", {**me, "code": "123456"})

    assert is_error and answer["code"] == "link_sent"
    assert "enlace" in answer["user_message"]
