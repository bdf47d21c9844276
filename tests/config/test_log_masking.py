"""What a log line may show, field by field: Django's `request` as its method and path (never
its query string), Celery's trace lines with their task ids and durations but their arguments
masked, secrets and identifiers hidden by their keys in any field, signed and opaque links
never written, plain lines masked as JSON lines are; and a Celery worker or beat writing the
project's lines, in the format GARANTE_LOG_FORMAT chooses, not Celery's own.

tests/security/test_log_scan.py runs the same through a whole conversation with real servers."""

import io
import json
import logging
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from celery.app.trace import LOG_FAILURE, LOG_RECEIVED, LOG_SUCCESS
from django.conf import settings
from django.test import Client, RequestFactory
from django.utils import timezone

from agenda.models import Appointment, AppointmentMessage
from agenda.opt_out import opt_out_key_new, opt_out_link
from config.celery import app as celery_app
from core.logs import PlainFormatter, RequestContextFilter
from tests import factories
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT, BRUNO_EMAIL, BRUNO_PHONE

ROOT = Path(__file__).resolve().parents[2]
TASK_ID = "5f0c8f43-9d1e-4b7a-8c2e-1a2b3c4d5e6f"
# Bruno's kwargs as Celery writes them (its `kwargsrepr`) for the notice to his old phone.
KWARGS = repr({"contact_id": 7, "channel": "sms", "destination": BRUNO_PHONE, "changed": ["phone"]})
# Shapes a customer's data takes in a text, each of which a line must not show.
PERSONAL = [
    BRUNO_PHONE,
    "600333444",
    "600 333 444",
    "600-333-444",
    BRUNO_EMAIL,
    "Bruno.Lopez@Example.COM",
    "bruno%40example.com",
    BRUNO_DOCUMENT,
    ANA_DOCUMENT,
    "12.345.678-Z",
]
# What operators search for, which masking must leave exactly as it is.
KEPT = [
    f"Task agenda.appointment_message_send[{TASK_ID}] succeeded in 0.7635294549999685s: 'sent'",
    "POST /api/tools/book_appointment 200 in 291.9 ms: tool book_appointment ok in 77.7 ms",
    "request 1aa8421416fa6719fdc3b2265a1a0f45 of gw-4f2a.77:1",
    "swept 1250 rows (3 failed) on 2026-12-07 10:00:00,123",
    "Cannot connect to redis://127.0.0.1:6379/0: Error 111 connecting. Retry in 2.00 seconds",
    "raised unexpected: SoftTimeLimitExceeded() in core.challenge_deliver",
    "test-5cb33fa8bc@worker-1 ready.",
]


@pytest.fixture
def request_lines(json_lines):
    json_lines.at_info("garante.requests", "django.request")
    return json_lines


@pytest.mark.django_db
def test_djangos_request_field_is_its_method_and_path_never_its_query(request_lines):
    query = {"email": BRUNO_EMAIL, "phone": BRUNO_PHONE, "name": "Bruno López"}

    response = Client().get("/api/v1/contacts", query)

    assert response.status_code == 401
    [refused] = [line for line in request_lines.all() if line["logger"] == "django.request"]
    assert refused["request"] == "GET /api/v1/contacts"
    assert refused["message"] == "Unauthorized: /api/v1/contacts"
    assert refused["status_code"] == 401
    [line] = request_lines.events("request")
    assert (line["path"], line["status"]) == ("/api/v1/contacts", 401)
    for written in [*PERSONAL, "Bruno", "López", "email="]:
        assert written not in request_lines.text, written


def test_a_request_logged_as_an_argument_is_its_method_and_path_too(json_lines):
    request = RequestFactory().get("/api/v1/contacts", {"email": BRUNO_EMAIL})

    logging.getLogger("garante.test").warning("refused %s", request)

    [line] = json_lines.all()
    assert line["message"] == "refused GET /api/v1/contacts"


def test_celerys_trace_lines_keep_the_task_id_and_duration_and_mask_the_arguments(json_lines):
    json_lines.at_info("celery.app.trace", "celery.worker.strategy")
    trace = logging.getLogger("celery.app.trace")
    # As celery.app.trace and celery.worker.strategy log them: the context is both the
    # message's argument and the record's `data`.
    received = {"id": TASK_ID, "name": "core.tasks.contact_change_notify", "args": "()"}
    received |= {"kwargs": KWARGS, "eta": None}
    logging.getLogger("celery.worker.strategy").info(
        LOG_RECEIVED, received, extra={"data": received}
    )
    succeeded = {**received, "return_value": "True", "runtime": 0.0123456789}
    trace.info(LOG_SUCCESS, succeeded, extra={"data": succeeded})
    try:
        raise ConnectionError("550 <bruno@example.com> refused, call +34 600 333 444")
    except ConnectionError as exc:
        failed = {**received, "exc": repr(exc), "description": "raised unexpected"}
        failed |= {"traceback": f"Traceback ...\n{exc!r}", "internal": False}
        trace.error(LOG_FAILURE, failed, exc_info=True, extra={"data": failed})

    received_line, success, failure = json_lines.all()
    name = "core.tasks.contact_change_notify"
    assert received_line["message"] == f"Task {name}[{TASK_ID}] received"
    assert success["message"] == f"Task {name}[{TASK_ID}] succeeded in 0.0123456789s: True"
    assert (success["data"]["id"], success["data"]["runtime"]) == (TASK_ID, 0.0123456789)
    assert success["data"]["kwargs"] == (
        "{'contact_id': 7, 'channel': 'sms', 'destination': '[number]', 'changed': ['phone']}"
    )
    assert failure["message"].startswith(f"Task {name}[{TASK_ID}] raised unexpected: ")
    assert "ConnectionError" in failure["exc_info"] and "[email]" in failure["exc_info"]
    for written in PERSONAL:
        assert written not in json_lines.text, written


def test_any_field_hides_secrets_and_identifiers_by_their_key_and_keeps_numbers(json_lines):
    at = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)

    logging.getLogger("garante.test").warning(
        "checked %(count)d contacts for %(who)s",
        {"count": 12, "who": BRUNO_EMAIL, "code": "482913"},
        extra={
            "phone": BRUNO_PHONE,
            "code": "482913",
            "contact": {
                "Email": "x@example.es",
                "document_number": 12345678,
                "notes": ["llamar al 600 333 444", 3],
            },
            "rows": 1234567,
            "duration_s": 0.0123,
            "at": at,
            "task_ids": (TASK_ID,),
            "empty": "",
        },
    )

    [line] = json_lines.all()
    assert line["message"] == "checked 12 contacts for [email]"
    assert (line["phone"], line["code"]) == ("[hidden]", "[hidden]")
    assert line["contact"] == {
        "Email": "[hidden]",
        "document_number": "[hidden]",
        "notes": ["llamar al [number]", 3],
    }
    assert (line["rows"], line["duration_s"], line["task_ids"]) == (1234567, 0.0123, [TASK_ID])
    assert (line["at"], line["empty"]) == (str(at), "")
    assert "482913" not in json_lines.text


@pytest.mark.parametrize("text", KEPT)
def test_what_operators_search_for_is_written_as_it_is(json_lines, text):
    logging.getLogger("garante.test").warning("%s", text, extra={"note": text})

    [line] = json_lines.all()
    assert line["message"] == line["note"] == text


@pytest.mark.parametrize("written", PERSONAL)
def test_a_customers_data_in_any_shape_is_masked(json_lines, written):
    logging.getLogger("garante.test").warning(
        "no contact %s", written, extra={"note": f"asked for {written}!"}
    )

    assert written not in json_lines.text
    [line] = json_lines.all()
    assert line["message"].startswith("no contact ") and line["note"].startswith("asked for ")


# Credentials as secrets.token_urlsafe(32) draws them (fixed here, so the test is the same every
# run), and one django.core.signing value.
OPAQUE = [
    "u8Qd3Vn_KpL0xT2rWmZ9aYbC4eF6gH1iJ5kM7nO-sP",
    "Zm9vYmFyYmF6cXV4cXV1eHh5enoAbCdEfGhIjKlMnOp",
    "7.s:YAtFesRSb0AUyvkKqTPPGRJhjX6MPYLGLTiVe9PHWgE",
]


@pytest.mark.parametrize("credential", OPAQUE)
def test_a_link_with_a_credential_is_written_without_it(json_lines, credential):
    link = f"https://citas.example.com/messages/opt-out/{credential}"

    logging.getLogger("garante.test").warning("sent %s", link, extra={"link": link})

    [line] = json_lines.all()
    assert line["message"] == "sent https://citas.example.com/messages/opt-out/[token]"
    assert line["link"] == "https://citas.example.com/messages/opt-out/[token]"


@pytest.mark.django_db
def sent_message(company, contact) -> AppointmentMessage:
    """A booking's SMS as it stands once claimed for sending: with its opt-out key."""
    service = factories.service(company)
    starts = timezone.now() + timedelta(days=2)
    appointment = Appointment.objects.create(
        company=company,
        reference="AP-LOGS01",
        contact=contact,
        service=service,
        professional=factories.marta(company, service),
        starts_at=starts,
        ends_at=starts + timedelta(minutes=30),
        blocked_from=starts,
        blocked_until=starts + timedelta(minutes=30),
        created_via="staff",
    )
    key, until = opt_out_key_new(timezone.now())
    return AppointmentMessage.objects.create(
        company=company,
        appointment=appointment,
        kind=AppointmentMessage.Kind.BOOKED,
        channel=AppointmentMessage.Channel.SMS,
        starts_at=starts,
        due_at=timezone.now(),
        opt_out_key=key,
        opt_out_until=until,
    )


def test_an_opt_out_links_requests_never_write_its_token(request_lines, company, ana, settings):
    settings.GARANTE_PUBLIC_URL = "https://citas.example.com"
    path = urlsplit(opt_out_link(sent_message(company, ana)).url).path
    token = path.rsplit("/", 1)[1]

    assert Client().get(path).status_code == 200
    # A token of any shape, even one no rule of text would take for a credential.
    assert Client().get("/messages/opt-out/abc").status_code == 404

    lines = request_lines.all()
    assert [line["path"] for line in request_lines.events("request")] == [
        "/messages/opt-out/[token]",
        "/messages/opt-out/[token]",
    ]
    [not_found] = [line for line in lines if line["logger"] == "django.request"]
    assert not_found["message"] == "Not Found: /messages/opt-out/[token]"
    assert not_found["request"] == "GET /messages/opt-out/[token]"
    assert token not in request_lines.text and "/abc" not in request_lines.text


def test_plain_lines_are_masked_as_json_lines_are():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PlainFormatter(settings.LOGGING["formatters"]["plain"]["format"]))
    handler.addFilter(RequestContextFilter())
    logger = logging.getLogger("garante.test.plain")
    logger.addHandler(handler)
    try:
        request = RequestFactory().get("/api/v1/contacts", {"phone": BRUNO_PHONE})
        logger.warning("refused %s for %s: %s", request, BRUNO_EMAIL, KEPT[0])
        try:
            raise ValueError("no contact with document 12.345.678-Z")
        except ValueError:
            logger.exception("failed with Bearer gt_%s", "s3cr3tTOKENvalue" * 2)
    finally:
        logger.removeHandler(handler)

    text = stream.getvalue()
    assert f"refused GET /api/v1/contacts for [email]: {KEPT[0]}" in text
    assert "failed with Bearer [token]" in text and "ValueError" in text
    for written in [*PERSONAL, "s3cr3t"]:
        assert written not in text, written


@celery_app.task(name="tests.config.log_inside_a_task", shared=False)
def log_inside_a_task() -> None:
    logging.getLogger("garante.test").warning("inside the task")


def test_the_lines_a_task_writes_carry_its_id_and_name(json_lines):
    result = log_inside_a_task.apply()

    [line] = json_lines.all()
    assert (line["task_id"], line["task_name"]) == (result.id, "tests.config.log_inside_a_task")


WORKER_SCRIPT = f"""
import json, logging, sys
import django
django.setup()  # Celery's Django fixup, before the worker or beat sets its logging up
from celery.app.trace import LOG_SUCCESS
from config.celery import app

app.log.setup(loglevel=sys.argv[1])  # what `celery worker` and `celery beat` call
root = logging.getLogger()
print(json.dumps({{"level": logging.getLevelName(root.level),
                  "formatters": [type(h.formatter).__name__ for h in root.handlers]}}))
context = {{"id": "{TASK_ID}", "name": "core.tasks.contact_change_notify", "args": "()",
           "kwargs": {KWARGS!r}, "return_value": "True", "runtime": 0.5}}
logging.getLogger("celery.app.trace").info(LOG_SUCCESS, context, extra={{"data": context}})
"""


@pytest.mark.parametrize(
    ("garante_level", "celery_level", "level"),
    [("WARNING", "INFO", "INFO"), ("INFO", "WARNING", "INFO"), ("INFO", "DEBUG", "DEBUG")],
)
def test_a_celery_worker_or_beat_writes_the_projects_json_lines_at_the_more_verbose_level(
    garante_level, celery_level, level
):
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SCRIPT, celery_level],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARANTE_LOG_FORMAT": "json",
            "GARANTE_LOG_LEVEL": garante_level,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"level": level, "formatters": ["JsonFormatter"]}
    [line] = [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]
    assert line["logger"] == "celery.app.trace"
    assert line["message"] == (
        f"Task core.tasks.contact_change_notify[{TASK_ID}] succeeded in 0.5s: True"
    )
    assert "'destination': '[number]'" in line["data"]["kwargs"]
    assert "600333444" not in done.stderr


def test_the_worker_keeps_its_plain_lines_masked_without_json():
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SCRIPT, "INFO"],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k != "GARANTE_LOG_FORMAT"},
            "DJANGO_SETTINGS_MODULE": "config.settings",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["formatters"] == ["PlainFormatter"]
    assert f"celery.app.trace Task core.tasks.contact_change_notify[{TASK_ID}] succeeded" in (
        done.stderr
    )


def test_a_uuid_is_kept_even_when_it_is_all_digits_and_dashes(json_lines):
    digits = "12345678-1234-4234-9234-123456789012"

    logging.getLogger("garante.test").warning("task %s", digits)

    assert json_lines.all()[0]["message"] == f"task {digits}"


RUNSERVER_SCRIPT = """
import logging, socket
import django
django.setup()
# As django.core.servers.basehttp.WSGIRequestHandler.log_message writes an access line.
logging.getLogger("django.server").info(
    '"%s" %s %s',
    "GET /api/v1/contacts?email=bruno%40example.com&phone=%2B34600333444 HTTP/1.1",
    "401",
    "58",
    extra={"request": socket.socket(), "server_time": "07/Dec/2026 10:00:00", "status_code": 401},
)
"""


def test_runservers_access_lines_are_the_projects_lines_masked():
    done = subprocess.run(
        [sys.executable, "-c", RUNSERVER_SCRIPT],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "GARANTE_LOG_FORMAT": "json",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    [line] = [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]
    assert line["logger"] == "django.server"
    assert line["message"] == '"GET /api/v1/contacts?[query] HTTP/1.1" 401 58'
    assert "bruno" not in done.stderr and "600333444" not in done.stderr
