"""`one_at_a_time`: work on one record, one transaction after another, on PostgreSQL."""

import threading

import pytest
from django.db import connection, transaction

from core.models import Company
from core.transactions import one_at_a_time
from tests.servers import at_once, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def waiting_for_an_advisory_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks JOIN pg_database ON pg_database.oid = database"
            " WHERE datname = current_database() AND locktype = 'advisory' AND NOT granted"
        )
        return cursor.fetchone()[0] > 0


def test_the_same_record_waits_its_turn_while_its_row_and_other_records_stay_free(
    company, other_company
):
    holding, release = threading.Event(), threading.Event()
    events: list[str] = []

    def first() -> None:
        with one_at_a_time(Company, company.pk):
            events.append("first in")
            holding.set()
            release.wait(timeout=20)
            events.append("first out")

    def second() -> None:
        holding.wait(timeout=20)
        with one_at_a_time(Company, company.pk):
            events.append("second in")

    def meanwhile() -> None:
        holding.wait(timeout=20)
        with transaction.atomic():
            with connection.cursor() as cursor:  # fail rather than wait, if the row were held
                cursor.execute("SET LOCAL lock_timeout = '5s'")
            Company.objects.filter(pk=company.pk).update(name="Otro nombre")
        events.append("row written")
        with one_at_a_time(Company, other_company.pk):
            events.append("other record in")
        wait_for(waiting_for_an_advisory_lock, timeout=20)  # the second is queued behind
        release.set()

    results = at_once(first, second, meanwhile)

    assert results == [None, None, None]
    assert events == ["first in", "row written", "other record in", "first out", "second in"]
