"""The slot search's two statements are SQL written from the models' metadata (not compiled by
the ORM on every search): they read what the ORM's querysets of the same rules read, at the
window's edges too, and the appointments' part stays a bounded index scan (PostgreSQL)."""

import json
from collections import defaultdict
from datetime import time, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agenda.availability.busy import BusyTimes, busy_times, scheduled_in_window
from agenda.availability.search import search_roster
from agenda.models import Appointment, Professional, Service, TimeOff
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from tests.factories import WEEKDAYS, local
from tests.statements import plan_nodes

pytestmark = pytest.mark.django_db

# The searched window: Tuesday 8 December 2026, 10:00-14:00 in Madrid.
START, END = local(2026, 12, 8, 10), local(2026, 12, 8, 14)


def busy_by_the_orm(ids, start, end, exclude=None) -> BusyTimes:
    """The busy times as the ORM's querysets of the same rules read them."""
    appointments = scheduled_in_window(ids, start, end)
    if exclude is not None:
        appointments = appointments.exclude(pk=exclude)
    time_off = TimeOff.objects.filter(professional_id__in=ids, ends_at__gt=start, starts_at__lt=end)
    ranges = defaultdict(list)
    for pk, busy_from, busy_until in [
        *appointments.values_list("professional_id", "blocked_from", "blocked_until"),
        *time_off.values_list("professional_id", "starts_at", "ends_at"),
    ]:
        ranges[pk].append((busy_from, busy_until))
    return BusyTimes(ranges)


def busy_minutes(busy: BusyTimes, ids) -> set[tuple[int, int]]:
    """Each (professional, minute) around the window that the busy times block."""
    first = START - timedelta(hours=2)
    return {
        (pk, n)
        for pk in ids
        for n in range(8 * 60)
        if busy.overlaps(pk, first + timedelta(minutes=n), first + timedelta(minutes=n + 1))
    }


@pytest.fixture
def luis(company, service):
    return professional_create(company=company, display_name="Luis", services=[service])


@pytest.fixture
def edges(company, service, ana, marta, luis):
    """Appointments and time off on both sides of each edge of the window; returns the id of
    an appointment inside it, for the search that leaves it out (a reschedule's)."""
    eva = professional_create(company=company, display_name="Eva", services=[service])

    def appointment(professional, blocked_from, blocked_until, state="scheduled"):
        return Appointment.objects.create(
            company=company,
            reference=f"AP-{Appointment.objects.count():06d}",
            contact=ana,
            service=service,
            professional=professional,
            starts_at=blocked_from,
            ends_at=blocked_until,
            blocked_from=blocked_from,
            blocked_until=blocked_until,
            created_via="staff",
            state=state,
        )

    minutes = timedelta(minutes=1)
    appointment(marta, local(2026, 12, 8, 9, 20), START)  # ends as the window starts
    appointment(marta, START, START + timedelta(minutes=40))  # starts with it
    appointment(marta, END - minutes, END + timedelta(minutes=39))  # ends after it
    appointment(luis, local(2026, 12, 8, 9, 30), START + minutes)  # ends just inside
    appointment(luis, END, END + timedelta(minutes=40))  # starts as it ends
    appointment(luis, local(2026, 12, 8, 11), local(2026, 12, 8, 11, 40), state="cancelled")
    appointment(eva, local(2026, 12, 8, 11), local(2026, 12, 8, 11, 40))  # not searched
    TimeOff.objects.create(professional=marta, starts_at=local(2026, 12, 8, 8), ends_at=START)
    TimeOff.objects.create(professional=marta, starts_at=END, ends_at=local(2026, 12, 8, 18))
    TimeOff.objects.create(professional=luis, starts_at=local(2026, 12, 8), ends_at=START + minutes)
    TimeOff.objects.create(
        professional=eva, starts_at=local(2026, 12, 8), ends_at=local(2026, 12, 9)
    )
    return appointment(luis, local(2026, 12, 8, 12), local(2026, 12, 8, 12, 40)).pk


@pytest.mark.parametrize("leaving_one_out", [False, True])
def test_the_busy_times_are_the_ones_the_orm_reads(edges, marta, luis, leaving_one_out):
    ids = [marta.pk, luis.pk]
    exclude = edges if leaving_one_out else None

    read = busy_minutes(busy_times(ids, START, END, exclude_appointment_id=exclude), ids)

    assert read == busy_minutes(busy_by_the_orm(ids, START, END, exclude), ids)
    assert {pk for pk, _ in read} == {marta.pk, luis.pk}
    twelve = int((local(2026, 12, 8, 12) - START + timedelta(hours=2)).total_seconds() // 60)
    assert ((luis.pk, twelve) in read) is not leaving_one_out


def test_nobody_to_search_is_never_busy(edges):
    assert busy_minutes(busy_times([], START, END), [0]) == set()


def roster_as_read(roster) -> list:
    return [
        (
            [getattr(b.professional, f.attname) for f in Professional._meta.concrete_fields],
            {day: sorted(hours) for day, hours in b.weekly.items()},
        )
        for b in roster.bookable
    ]


def roster_by_the_orm(company, service, only=None) -> list:
    professionals = Professional.objects.filter(company=company, active=True, services=service)
    if only is not None:
        professionals = professionals.filter(pk=only.pk)
    rows = []
    for p in professionals.order_by("display_name", "pk").prefetch_related("working_hours"):
        weekly = defaultdict(list)
        for hours in p.working_hours.all():
            weekly[hours.weekday].append((hours.start_time, hours.end_time))
        rows.append(
            (
                [getattr(p, f.attname) for f in Professional._meta.concrete_fields],
                {day: sorted(h) for day, h in weekly.items()},
            )
        )
    return rows


def test_the_roster_is_the_one_the_orm_reads(company, other_company, service, marta, luis):
    professional_create(
        company=company,
        display_name="Ana",
        services=[service],
        weekly_hours=[(d, time(16), time(20)) for d in WEEKDAYS] + [(5, time(9), time(14))],
    )
    gone = professional_create(company=company, display_name="Bea", services=[service])
    gone.active = False
    gone.save()
    professional_create(
        company=company,
        display_name="Carla",
        services=[Service.objects.create(company=company, name="Tinte")],
        weekly_hours=[(0, time(9), time(13))],
    )
    elsewhere = Service.objects.create(company=other_company, name="Corte de pelo")
    professional_create(company=other_company, display_name="Dani", services=[elsewhere])

    roster = search_roster(company, service)

    assert roster_as_read(roster) == roster_by_the_orm(company, service)
    assert [b.professional.display_name for b in roster.bookable] == ["Ana", "Luis", "Marta"]
    settings = agenda_settings_for(company=company)
    assert [getattr(roster.settings, f.attname) for f in settings._meta.concrete_fields] == [
        getattr(settings, f.attname) for f in settings._meta.concrete_fields
    ]
    narrowed = search_roster(company, service, marta)
    assert roster_as_read(narrowed) == roster_by_the_orm(company, service, only=marta)
    assert len(narrowed.bookable) == 1


@pytest.mark.postgres
def test_the_busy_times_statement_touches_only_rows_near_the_window(long_history, marta):
    with CaptureQueriesContext(connection) as captured:
        busy_times([marta.pk], local(2026, 12, 7), local(2026, 12, 14))
    (statement,) = [q["sql"] for q in captured.captured_queries]

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}")
        plan = cursor.fetchone()[0][0]["Plan"]

    scans = [n for n in plan_nodes(plan) if "Scan" in n["Node Type"]]
    appointment_scans = [n for n in scans if n.get("Relation Name") == "agenda_appointment"]
    assert appointment_scans and all(n["Node Type"] != "Seq Scan" for n in appointment_scans)
    examined = sum(
        n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in appointment_scans
    )
    assert examined < 50, json.dumps(plan)
