"""Seed 2's guarantees against real gunicorn servers on PostgreSQL: a replay survives a restart
of the server (the record is durable), and a duplicate that arrives while the first request
still runs is told to retry (409 request_in_progress, Retry-After), never run twice."""

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from datetime import time as clock_time

import httpx
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agenda.models import Appointment
from agenda.services import appointment_book
from core.models import IdempotencyRecord
from support.models import Case
from support.services import case_open
from tests.servers import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def client(server, token: str, key: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    return httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=30)


def test_a_replay_after_a_server_restart_returns_the_stored_answer(
    gunicorn_server, company, ana, rw_token
):
    case = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")
    first_server = gunicorn_server(workers=1)
    with client(first_server, rw_token, "start-case-1") as http:
        first = http.post(f"/cases/{case.reference}/start")
    first_server.stop()

    second_server = gunicorn_server(workers=1)
    with client(second_server, rw_token, "start-case-1") as http:
        replay = http.post(f"/cases/{case.reference}/start")
        fresh = httpx.post(
            f"{second_server.url}/api/v1/cases/{case.reference}/start",
            headers={"Authorization": f"Bearer {rw_token}", "Idempotency-Key": "start-case-2"},
        )

    assert first.status_code == 200, first_server.log()
    assert replay.status_code == 200, second_server.log()
    assert replay.headers["X-Idempotency-Replayed"] == "true"
    assert replay.content == first.content
    # Run again instead of replayed, the same transition would have been refused:
    assert fresh.status_code == 422
    assert fresh.json()["state"] == "in_progress"
    assert Case.objects.get(pk=case.pk).state == Case.State.IN_PROGRESS


def test_a_duplicate_while_the_first_still_runs_is_409_in_progress_with_retry_after(
    gunicorn_server, company, ana, service, marta, rw_token
):
    # Two days ahead at 10:00 local: bookable and cancellable at any real time of day.
    day = timezone.now().astimezone(company.tz).date() + timedelta(days=2)
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=datetime.combine(day, clock_time(10), tzinfo=company.tz),
        created_via=Appointment.Via.STAFF,
    )
    server = gunicorn_server(workers=2, env={"GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS": "300"})
    path = f"/appointments/{appointment.reference}/cancel"

    with client(server, rw_token, "cancel-1") as first_http, ThreadPoolExecutor(1) as pool:
        with transaction.atomic():
            # Staff hold the appointment's row: the first cancel waits for it inside its
            # idempotency transaction, with its record already inserted.
            Appointment.objects.select_for_update().get(pk=appointment.pk)
            first = pool.submit(first_http.post, path)
            wait_for(_a_request_waits_for_a_lock, timeout=20, interval=0.05)
            with client(server, rw_token, "cancel-1") as twin_http:
                started = time.monotonic()
                twin = twin_http.post(path)
                waited = time.monotonic() - started
        first = first.result()
    with client(server, rw_token, "cancel-1") as http:
        retry = http.post(path)

    assert twin.status_code == 409, server.log()
    assert (twin.json()["error_type"], twin.json()["code"]) == ("CONFLICT", "request_in_progress")
    assert twin.headers["Retry-After"] == str(twin.json()["retry_after_seconds"])
    assert twin.headers["Retry-After"] == str(settings.GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS)
    assert 0.3 <= waited < 2.5  # bounded by the lock timeout, not by the held row
    assert first.status_code == 200
    assert first.json()["state"] == "cancelled"
    assert retry.status_code == 200
    assert retry.headers["X-Idempotency-Replayed"] == "true"
    assert retry.content == first.content
    assert IdempotencyRecord.objects.get(company=company, key="cancel-1").replay_count == 1


def _a_request_waits_for_a_lock() -> bool:
    """Whether a server's session waits for a lock (the row the test holds): the first request
    is inside its idempotency transaction, its record inserted. Polled rather than slept for:
    a worker's first request on a busy host may take more than a second to get there."""
    with connection.cursor() as cursor:
        # Asked inside the test's transaction, which keeps its first view of the statistics.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0
