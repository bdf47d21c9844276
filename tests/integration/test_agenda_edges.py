"""The agenda's edges over the integration API (issue #33, item 3): the same services, so the
same answers as the tools."""

from datetime import time

import pytest

from agenda.services import professional_create
from tests.factories import EVERY_DAY
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


def test_a_slot_search_past_the_horizon_names_the_last_bookable_date(
    api, service, marta, frozen_clock
):
    response = api.get("slots", service=reference_of(service), date_from="2027-02-06")

    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error_type"] == "VALIDATION"
    assert body["code"] == "slot_beyond_horizon"
    assert "viernes 05/02/2027 a las 08:00" in body["user_message"]
    assert body["last_bookable"]["date"] == "2027-02-05"


def test_a_customer_cannot_be_booked_with_two_professionals_at_once(
    api, company, service, marta, ana, frozen_clock
):
    luis = professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=[(d, time(9), time(13)) for d in EVERY_DAY],
    )
    body = {"contact": reference_of(ana), "service": reference_of(service)}
    first = api.post(
        "appointments",
        body | {"professional": reference_of(marta), "starts_at": "2026-12-08T10:00:00+01:00"},
    )
    assert first.status_code == 201, first.content

    second = api.post(
        "appointments",
        body | {"professional": reference_of(luis), "starts_at": "2026-12-08T10:15:00+01:00"},
    )

    assert second.status_code == 422, second.content
    assert second.json()["code"] == "appointment_overlap"
    assert "martes 08/12/2026 a las 10:00" in second.json()["user_message"]


def test_slots_run_until_midnight_when_the_hours_end_at_24_00(api, company, service, frozen_clock):
    noa = professional_create(
        company=company,
        display_name="Noa",
        services=[service],
        weekly_hours=[(1, time(22), time(0))],  # Tuesdays 22:00-24:00
    )

    response = api.get(
        "slots",
        service=reference_of(service),
        professional=reference_of(noa),
        date_from="2026-12-08",
        date_to="2026-12-09",
    )

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(s["date"], s["time"]) for s in results] == [
        ("2026-12-08", "22:00"),
        ("2026-12-08", "22:30"),
        ("2026-12-08", "23:00"),
        ("2026-12-08", "23:30"),
    ]
    assert results[-1]["ends_at"] == "2026-12-09T00:00:00+01:00"
