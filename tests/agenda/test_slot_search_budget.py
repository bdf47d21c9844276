"""A slot search costs a fixed number of statements, whatever the professionals or days searched;
and find_available_slots still answers the professional the customer named."""

from datetime import time, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agenda.availability.search import slots_available
from agenda.models import AgendaSettings, Appointment, Service
from agenda.services import appointment_book, professional_create, time_off_add
from core.errors import Ambiguous, NotFound
from tests.factories import MADRID, MONDAY_8AM, WEEKDAYS, local
from tests.statements import Budget, shape
from tooling.context import CallMeta, ToolContext
from tooling.ledger import ledger_record_shown
from tooling.models import ExposedReference
from tooling.output import capped
from tooling.registry import registry

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("process_caches_on")]

# slots_available: the roster (agenda settings, professionals and their weekly hours) and the
# busy times (appointments and time off together).
SEARCH_STATEMENTS = 2
# The tool adds the ledger's insert of the slots it shows; its service comes from the process
# cache, read first when the cache is cold (the conversation is read before counting: it
# belongs to the call, not to the search).
TOOL = Budget(at_most=3, includes=("INSERT tooling_exposedreference",))
COLD_TOOL = Budget(at_most=4, includes=("INSERT tooling_exposedreference",))


@pytest.fixture
def busy_marta(company, service, marta, ana):
    """Marta with an appointment and a morning off in the first searched days."""
    appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )
    time_off_add(
        professional=marta, starts_at=local(2026, 12, 9, 9), ends_at=local(2026, 12, 9, 13)
    )
    return marta


@pytest.fixture
def two_more(company, service, ana, busy_marta):
    """Luis and Eva also give the service, with their own hours, appointments and time off."""
    added = []
    for name, hours in (("Luis", (time(10), time(14))), ("Eva", (time(15), time(20)))):
        professional = professional_create(
            company=company,
            display_name=name,
            services=[service],
            weekly_hours=[(d, *hours) for d in WEEKDAYS],
        )
        time_off_add(
            professional=professional, starts_at=local(2026, 12, 10), ends_at=local(2026, 12, 11)
        )
        added.append(professional)
    appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=added[0],
        starts_at=local(2026, 12, 8, 11),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )
    return added


def search_statements(company, service, days: int) -> tuple[int, int]:
    """Statements of one search over `days` days from Tuesday, and the slots found."""
    with CaptureQueriesContext(connection) as queries:
        slots = slots_available(
            company=company,
            service=service,
            starts_at=local(2026, 12, 8),
            ends_at=local(2026, 12, 8) + timedelta(days=days),
            now=MONDAY_8AM,
        )
    return len(queries.captured_queries), len(slots)


def find(company, conversation_id: str = "budget", **arguments) -> tuple[dict, list[str]]:
    """The tool's answer and the shapes of the statements it took, called as the registry
    serves it (tooling.execution: the answer capped, then what it shows recorded)."""
    tool = registry.get("find_available_slots")
    params = tool.input.model_validate(
        {"service": "Corte de pelo", "from": "2026-12-08"} | arguments
    )
    ctx = ToolContext(company=company, meta=CallMeta(conversation_id=conversation_id))
    ctx.conversation  # noqa: B018 (read outside the count)
    with CaptureQueriesContext(connection) as queries:
        answer, text = capped(tool.handler(ctx, params))
        ledger_record_shown(ctx, text)
    return answer, [shape(query["sql"]) for query in queries.captured_queries]


def test_a_search_costs_the_same_statements_for_one_or_three_professionals(
    company, service, busy_marta, request
):
    alone = search_statements(company, service, days=1)
    request.getfixturevalue("two_more")
    three = search_statements(company, service, days=1)

    assert alone[0] == three[0] == SEARCH_STATEMENTS
    # Tuesday 8 December: Marta's free slots alone, then hers and the other two's.
    assert (alone[1], three[1]) == (13, 28)


@pytest.mark.parametrize(("days", "slots"), [(1, 28), (7, 138), (31, 750)])
def test_a_search_costs_the_same_statements_for_any_window(company, service, two_more, days, slots):
    statements, found = search_statements(company, service, days=days)

    assert statements == SEARCH_STATEMENTS
    assert found == slots


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"to": "2026-12-08", "limit": 1},
        {"to": "2027-01-07", "limit": 20},
        {"professional": "Luis"},
        {"professional": "eva", "to": "2027-01-07"},
    ],
)
def test_the_tool_costs_the_same_statements_for_any_search(
    company, two_more, frozen_clock, arguments
):
    _, cold = find(company, **arguments)
    answer, statements = find(company, **arguments)

    assert answer["items"]
    TOOL.check(statements)
    COLD_TOOL.check(cold)
    assert "SELECT agenda_service" in cold and "SELECT agenda_service" not in statements


def test_a_named_professional_gets_only_their_slots(company, two_more, frozen_clock):
    answer, _ = find(company, professional="luis", to="2026-12-08", limit=20)

    assert {item["professional"] for item in answer["items"]} == {"Luis"}
    # Luis works 10-14 and is busy with an appointment at 11:00 (plus its buffer).
    assert [item["time"] for item in answer["items"]] == [
        "10:00",
        "12:00",
        "12:30",
        "13:00",
        "13:30",
    ]


def test_the_slots_shown_are_recorded_for_the_conversation(company, two_more, frozen_clock):
    answer, _ = find(company, conversation_id="ledger-check", to="2026-12-08", limit=5)

    seen = ExposedReference.objects.filter(conversation__external_id="ledger-check", kind="slot")
    assert {row.reference for row in seen} == {item["slot"] for item in answer["items"]}
    assert {row.data["professional"] for row in seen} <= {p.pk for p in company.professionals.all()}


def test_a_named_professional_without_working_hours_has_no_slots(
    company, service, marta, frozen_clock
):
    professional_create(company=company, display_name="Nuevo", services=[service])

    answer, _ = find(company, professional="Nuevo")

    assert answer["items"] == []


def test_an_unknown_professional_is_not_found(company, marta, frozen_clock):
    with pytest.raises(NotFound) as error:
        find(company, professional="Pablo")

    assert error.value.code == "professional_not_found"


def test_a_name_several_professionals_contain_is_ambiguous_in_name_order(
    company, service, marta, frozen_clock
):
    professional_create(company=company, display_name="Marta Ruiz", services=[service])
    professional_create(company=company, display_name="Marta López", services=[service])

    with pytest.raises(Ambiguous) as error:
        find(company, professional="mart")

    assert error.value.code == "ambiguous_professional"
    assert error.value.extras["candidates"] == ["Marta", "Marta López", "Marta Ruiz"]


def test_an_exact_name_wins_over_names_that_contain_it(company, service, marta, frozen_clock):
    professional_create(company=company, display_name="Marta Ruiz", services=[service])

    answer, _ = find(company, professional="MARTA ", to="2026-12-08")

    assert {item["professional"] for item in answer["items"]} == {"Marta"}


def test_a_company_without_agenda_settings_searches_with_the_defaults(make_company):
    fresh = make_company(name="Barbería Nueva")
    haircut = Service.objects.create(company=fresh, name="Corte", duration_minutes=30)
    professional_create(
        company=fresh, display_name="Leo", services=[haircut], weekly_hours=[(1, time(9), time(10))]
    )

    slots = slots_available(
        company=fresh,
        service=haircut,
        starts_at=local(2026, 12, 8),
        ends_at=local(2026, 12, 9),
        now=MONDAY_8AM,
    )

    assert AgendaSettings.objects.filter(company=fresh).exists()
    # The default step is 15 minutes: 09:00 to 09:30 for a 30-minute service ending by 10:00.
    assert [s.local(MADRID).strftime("%H:%M") for s in slots] == ["09:00", "09:15", "09:30"]
