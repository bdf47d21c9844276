"""Idempotency records for staff and upkeep: the read-only admin and the periodic purge."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY

from core.errors import Conflict
from core.idempotency import idempotent_execute
from core.idempotency.engine import idempotency_records_purge
from core.idempotency.tasks import (
    PURGE_ANSWER_SECONDS,
    PURGE_TASK_NAME,
    idempotency_records_purge_task,
)
from core.models import IdempotencyRecord
from core.postgresql.base import bound_this_process, current_deadline
from core.sql import Statement, send_or_keep
from tests.testapp.models import Counter
from tests.wording import told_in_its_own_words

pytestmark = [pytest.mark.django_db, pytest.mark.staff_permissions("core.view_idempotencyrecord")]

ROOT = Path(__file__).resolve().parents[2]
SECRET_ANSWER = "Reserva RS-SECRET de Ana Pérez"


def executed(company, key: str, operation: str = "testapp_cancel_reservation"):
    return idempotent_execute(
        company=company,
        key=key,
        operation=operation,
        request={"reference": "RS-2"},
        effect=lambda: ({"detail": SECRET_ANSWER}, 200),
    )


def test_staff_see_their_companys_records_with_their_lifetimes_and_replays(
    client, staff, company, other_company
):
    executed(company, "k-1")
    executed(company, "k-1")  # a replay
    executed(other_company, "k-9", operation="other_company_operation")
    client.force_login(staff)

    page = client.get("/admin/core/idempotencyrecord/").content.decode()

    assert "testapp_cancel_reservation" in page
    assert "other_company_operation" not in page
    for column in ("column-company", "column-created_at", "column-expires_at"):
        assert column in page
    assert '<td class="field-replay_count">1</td>' in page


def test_the_list_never_shows_the_stored_answers(client, admin_user, company):
    executed(company, "k-1")
    client.force_login(admin_user)

    page = client.get("/admin/core/idempotencyrecord/").content.decode()

    assert "testapp_cancel_reservation" in page
    assert "RS-SECRET" not in page


def test_staff_cannot_open_another_companys_record(client, staff, other_company):
    executed(other_company, "k-9")
    record = IdempotencyRecord.objects.get()
    client.force_login(staff)

    response = client.get(f"/admin/core/idempotencyrecord/{record.pk}/change/")

    assert response.status_code == 302  # the admin redirects: "does not exist"


def test_records_are_read_only_even_for_superusers(client, admin_user, company):
    executed(company, "k-1")
    record = IdempotencyRecord.objects.get()
    client.force_login(admin_user)
    url = f"/admin/core/idempotencyrecord/{record.pk}"

    assert client.get("/admin/core/idempotencyrecord/add/").status_code == 403
    assert client.get(f"{url}/delete/").status_code == 403
    detail = client.get(f"{url}/change/")
    client.post(f"{url}/change/", {"operation": "tampered", "response": "{}"})

    assert detail.status_code == 200
    assert 'name="operation"' not in detail.content.decode()  # shown, not editable
    record.refresh_from_db()
    assert record.operation == "testapp_cancel_reservation"
    assert json.loads(record.response) == {"detail": SECRET_ANSWER}


def test_the_purge_task_tombstones_and_forgets_what_has_expired(company):
    executed(company, "live")
    executed(company, "stale")
    executed(company, "gone")
    now = timezone.now()
    IdempotencyRecord.objects.filter(key="stale").update(replay_until=now - timedelta(hours=1))
    IdempotencyRecord.objects.filter(key="gone").update(
        replay_until=now - timedelta(days=40), expires_at=now - timedelta(days=1)
    )

    result = idempotency_records_purge_task.delay().get()

    assert result == {"tombstoned": 2, "deleted": 1}
    remaining = dict(IdempotencyRecord.objects.values_list("key", "response"))
    assert set(remaining) == {"live", "stale"}
    assert json.loads(remaining["live"]) == {"detail": SECRET_ANSWER}
    assert remaining["stale"] is None


def test_the_purge_waits_for_the_database_longer_than_a_workers_other_tasks(monkeypatch):
    """A worker waits seconds for each answer (config.celery); tombstoning reads the whole table,
    so the purge's bound is its own, long but not endless."""
    seen = []
    monkeypatch.setattr(
        "core.idempotency.tasks.idempotency_records_purge",
        lambda: seen.append(current_deadline()) or (0, 0),
    )
    bound_this_process(2)
    try:
        idempotency_records_purge_task.delay().get()
    finally:
        bound_this_process(None)

    assert seen == [PURGE_ANSWER_SECONDS] and PURGE_ANSWER_SECONDS > 60


def test_celery_beat_schedules_the_purge(tmp_path):
    """What `celery -A config beat` does at start-up, in a fresh process: import the apps'
    task modules, finalise the app, build the scheduler from the merged schedule."""
    script = (
        "from config.celery import app\n"
        "app.loader.init_worker()\n"
        "app.finalize()\n"
        "from celery.beat import Scheduler\n"
        f"entry = Scheduler(app=app, lazy=False).schedule[{PURGE_TASK_NAME!r}]\n"
        "print(entry.task, entry.schedule.remaining_estimate(entry.last_run_at).total_seconds())\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    task, seconds_to_next_run = done.stdout.split()
    assert task == PURGE_TASK_NAME
    assert 0 <= float(seconds_to_next_run) <= 3600  # at least hourly


# --- what the engine answers, stores and counts -------------------------------------------


def outcome_counts() -> dict[str, float]:
    """The engine's outcome counters (core.metrics), as /metrics shows them."""
    return {
        outcome: REGISTRY.get_sample_value(
            "garante_idempotency_outcomes_total", {"outcome": outcome}
        )
        or 0.0
        for outcome in ("executed", "replayed", "joined", "conflict", "expired", "in_progress")
    }


def test_each_outcome_is_counted_once_and_each_refusal_says_why(company):
    before = outcome_counts()
    executed(company, "k-1")
    executed(company, "k-1")
    with pytest.raises(Conflict) as conflict:
        executed(company, "k-1", operation="testapp_increment_counter")
    IdempotencyRecord.objects.filter(key="k-1").update(
        replay_until=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(Conflict) as expired:
        executed(company, "k-1")
    after = outcome_counts()

    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {
        "executed": 1,
        "replayed": 1,
        "conflict": 1,
        "expired": 1,
    }
    assert (conflict.value.code, conflict.value.http_status) == ("idempotency_conflict", 409)
    assert (expired.value.code, expired.value.http_status) == ("idempotency_expired", 410)
    told_in_its_own_words(conflict.value)
    told_in_its_own_words(expired.value)


def test_an_answer_is_stored_and_replayed_as_compact_utf8_text(company):
    first = executed(company, "k-1")
    again = executed(company, "k-1")

    expected = '{"detail":"Reserva RS-SECRET de Ana Pérez"}'
    assert (first.text, again.text) == (expected, expected)
    assert IdempotencyRecord.objects.get(key="k-1").response == expected


def test_the_writes_an_effect_keeps_are_written_with_its_answer(company):
    def effect():
        send_or_keep(
            Statement(
                f"INSERT INTO {Counter._meta.db_table} (company_id, name, value) "
                "VALUES (%s, %s, %s)",
                [company.pk, "kept", 7],
            )
        )
        return {"kept": True}, 200

    result = idempotent_execute(
        company=company, key="k-kept", operation="op", request={}, effect=effect
    )

    assert result.body == {"kept": True}
    assert list(Counter.objects.filter(company=company).values_list("name", "value")) == [
        ("kept", 7)
    ]


def test_the_purge_judges_by_the_instant_it_is_given(company):
    executed(company, "k-1")
    record = IdempotencyRecord.objects.get(key="k-1")

    assert idempotency_records_purge(now=record.replay_until - timedelta(seconds=1)) == (0, 0)
    assert idempotency_records_purge(now=record.replay_until) == (1, 0)
    assert idempotency_records_purge(now=record.expires_at) == (0, 1)
    assert not IdempotencyRecord.objects.exists()


def test_reusing_a_forgotten_key_forgets_only_that_keys_record(company, other_company):
    executed(company, "reused")
    executed(company, "also-forgotten")
    executed(other_company, "reused")
    long_ago = timezone.now() - timedelta(days=40)
    IdempotencyRecord.objects.update(
        replay_until=long_ago, expires_at=timezone.now() - timedelta(seconds=1)
    )

    again = executed(company, "reused")

    assert again.replayed is False
    left = IdempotencyRecord.objects.order_by("company_id", "key")
    assert sorted((r.company_id, r.key, r.response is None) for r in left) == sorted(
        [
            (company.pk, "also-forgotten", False),
            (company.pk, "reused", False),
            (other_company.pk, "reused", False),
        ]
    )
    assert idempotency_records_purge()[1] == 2  # the two left forgotten, counted once each
