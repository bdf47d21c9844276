"""list_services answers from the process cache of the catalogue: a warm call reads nothing,
a change made in this process shows at once, one made elsewhere within the cache's lifetime.
The slot search names its service from the same cache; booking still reads it."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agenda.models import Service
from agenda.selectors import service_resolve, service_resolve_cached
from core.errors import Ambiguous, NotFound
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

pytestmark = pytest.mark.usefixtures("process_caches_on")


def list_services(company, **arguments):
    outcome = call_tool(
        registry.get("list_services"),
        company=company,
        arguments=arguments,
        meta=CallMeta(conversation_id="conv-catalogue"),
        surface="mcp",
    )
    assert not outcome.is_error, outcome.body
    return outcome.body


def names(body) -> list[str]:
    return [item["name"] for item in body["items"]]


def add_service(company, name, **fields) -> Service:
    return Service.objects.create(company=company, name=name, **fields)


def test_a_warm_call_reads_nothing_but_its_trace(company):
    add_service(company, "Tinte", duration_minutes=90, description="Color completo")
    add_service(company, "Corte de pelo")
    first = list_services(company)
    with CaptureQueriesContext(connection) as captured:
        again = list_services(company)
    assert again == first
    assert first["items"] == [
        {"name": "Corte de pelo", "description": "", "duration_minutes": 30},
        {"name": "Tinte", "description": "Color completo", "duration_minutes": 90},
    ]
    # The trace row, written at once in tests (in a savepoint of the test's transaction).
    assert [
        q["sql"]
        for q in captured
        if "tooling_toolcall" not in q["sql"] and not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ] == []


def test_changes_made_here_show_at_once(company):
    cut = add_service(company, "Corte de pelo")
    assert names(list_services(company)) == ["Corte de pelo"]
    add_service(company, "Tinte")
    assert names(list_services(company)) == ["Corte de pelo", "Tinte"]
    cut.name = "Corte"
    cut.save()
    assert names(list_services(company)) == ["Corte", "Tinte"]
    cut.active = False
    cut.save()
    assert names(list_services(company)) == ["Tinte"]
    Service.objects.get(company=company, name="Tinte").delete()
    assert names(list_services(company)) == []


def test_a_change_made_elsewhere_shows_within_the_cache_lifetime(company, cache_clock):
    add_service(company, "Corte de pelo")
    assert names(list_services(company)) == ["Corte de pelo"]
    # Another process withdraws it: an UPDATE this process hears nothing about.
    Service.objects.filter(company=company).update(active=False)
    cache_clock["now"] += 4.9
    assert names(list_services(company)) == ["Corte de pelo"]
    cache_clock["now"] += 0.2
    assert names(list_services(company)) == []


def test_each_company_sees_its_own_catalogue(company, other_company):
    add_service(company, "Corte de pelo")
    add_service(other_company, "Limpieza dental")
    assert names(list_services(company)) == ["Corte de pelo"]
    assert names(list_services(other_company)) == ["Limpieza dental"]
    add_service(other_company, "Ortodoncia")  # forgets the other company only
    with CaptureQueriesContext(connection) as captured:
        assert names(list_services(company)) == ["Corte de pelo"]
    assert not [q for q in captured if "agenda_service" in q["sql"]]


def test_the_longest_page_still_tells_whether_more_exist(company):
    for n in range(50):
        add_service(company, f"S{n:02d}")
    body = list_services(company, limit=50)
    assert (body["count"], body["has_more"]) == (50, False)
    add_service(company, "S50")
    body = list_services(company, limit=50)
    assert (body["count"], body["has_more"]) == (50, True)
    assert names(body) == [f"S{n:02d}" for n in range(50)]
    body = list_services(company, limit=5)
    assert names(body) == [f"S{n:02d}" for n in range(5)] and body["has_more"] is True


# --- The slot search's service --------------------------------------------------------------


def search(company, service: str) -> dict:
    outcome = call_tool(
        registry.get("find_available_slots"),
        company=company,
        arguments={"service": service, "from": "2026-12-08"},
        meta=CallMeta(conversation_id="conv-catalogue"),
        surface="mcp",
    )
    return outcome.body


def resolved(resolve, company, name: str) -> tuple:
    """What a service resolver answers, comparable: the service's fields or the error."""
    try:
        service = resolve(company=company, name=name)
    except (NotFound, Ambiguous) as error:
        return type(error).__name__, error.code, error.extras.get("candidates")
    return tuple(getattr(service, f.attname) for f in Service._meta.concrete_fields)


@pytest.mark.parametrize(
    "name", ["Corte de pelo", "  corte DE pelo ", "corte", "tinte", "TINTE RAÍZ", "peinado", ""]
)
def test_the_cached_service_lookup_answers_as_the_database_one(company, other_company, name):
    add_service(company, "Corte de pelo", buffer_after_minutes=10)
    add_service(company, "Corte de barba", duration_minutes=20)
    add_service(company, "Tinte", duration_minutes=90, description="Color completo")
    add_service(company, "Tinte raíz", duration_minutes=60)
    add_service(company, "Peinado", active=False)
    add_service(other_company, "Peinado")

    cached = resolved(service_resolve_cached, company, name)
    again = resolved(service_resolve_cached, company, name)  # warm

    assert cached == again == resolved(service_resolve, company, name)


def test_a_warm_slot_search_does_not_read_the_service(company):
    add_service(company, "Corte de pelo")
    search(company, "Corte de pelo")
    with CaptureQueriesContext(connection) as captured:
        search(company, "Corte de pelo")
    assert not [q for q in captured if '"agenda_service"' in q["sql"]]


def test_a_service_changed_here_is_searched_as_changed_at_once(company):
    cut = add_service(company, "Corte de pelo")
    assert search(company, "Corte de pelo")["service"] == "Corte de pelo"
    cut.name = "Corte"
    cut.save()
    assert search(company, "Corte")["service"] == "Corte"
    cut.active = False
    cut.save()
    assert search(company, "Corte")["code"] == "service_not_found"


def test_a_service_withdrawn_elsewhere_is_searched_for_the_cache_lifetime_never_booked(
    company, cache_clock
):
    add_service(company, "Corte de pelo")
    assert search(company, "Corte de pelo")["service"] == "Corte de pelo"
    Service.objects.filter(company=company).update(active=False)  # another process
    cache_clock["now"] += 4.9
    assert search(company, "Corte de pelo")["service"] == "Corte de pelo"
    # Booking resolves the service in the database (and checks it again in the slot check).
    with pytest.raises(NotFound):
        service_resolve(company=company, name="Corte de pelo")
    cache_clock["now"] += 0.2
    assert search(company, "Corte de pelo")["code"] == "service_not_found"


def test_a_catalogue_longer_than_a_page_is_listed_whole_through_its_cursor(company):
    Service.objects.bulk_create(
        Service(company=company, name=f"Servicio {n:02}", duration_minutes=30) for n in range(60)
    )

    first = list_services(company, limit=50)
    rest = list_services(company, limit=50, cursor=first["next_cursor"])

    assert first["has_more"] is True and rest["has_more"] is False
    assert rest["next_cursor"] is None
    assert names(first) + names(rest) == [f"Servicio {n:02}" for n in range(60)]
