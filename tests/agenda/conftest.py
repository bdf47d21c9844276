"""Agenda fixtures: a long history of appointments, for the tests of what a search scans (the
salon itself, `service` and `marta`, comes from tests/conftest.py)."""

from datetime import UTC, timedelta

import pytest
from django.db import connection

from agenda.models import Appointment
from tests.factories import local

HISTORY = 5000


@pytest.fixture
def long_history(company, service, marta, ana):
    """Five thousand scheduled appointments before the searched week, one per hour."""
    # In UTC: adding hours to a Madrid wall-clock time would repeat an hour in March.
    first = local(2026, 1, 5, 9).astimezone(UTC)
    Appointment.objects.bulk_create(
        Appointment(
            company=company,
            reference=f"AP-H{n:05d}",
            contact=ana,
            service=service,
            professional=marta,
            starts_at=first + timedelta(hours=n),
            ends_at=first + timedelta(hours=n, minutes=30),
            blocked_from=first + timedelta(hours=n),
            blocked_until=first + timedelta(hours=n, minutes=40),
            created_via="staff",
        )
        for n in range(HISTORY)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agenda_appointment")
    assert Appointment.objects.filter(starts_at__gte=local(2026, 12, 7)).count() == 0
