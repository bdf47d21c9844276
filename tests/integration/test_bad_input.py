"""Bad input is 4xx VALIDATION, never 503 SYSTEM (which tells a client to retry the same thing):
dates at the calendar's ends, amounts past what is stored, bodies past the size limit."""

import json

import pytest

from sales.models import Opportunity
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "resource", ["appointments", "quotes", "opportunities", "cases", "contacts"]
)
def test_a_date_to_at_the_calendar_end_is_refused_as_an_invalid_date(api, resource):
    response = api.get(resource, date_to="9999-12-31")

    assert response.status_code == 422, response.content
    body = response.json()
    assert (body["error_type"], body["code"]) == ("VALIDATION", "invalid_date")
    assert [e["field"] for e in body["problems"]] == ["date_to"]


def test_the_calendar_ends_still_work_as_open_bounds(api):
    response = api.get("cases", date_from="0001-01-01", date_to="9999-12-30")

    assert response.status_code == 200


def test_an_opportunity_amount_that_rounds_past_the_column_is_refused(api, ana):
    response = api.post(
        "opportunities",
        {"contact": reference_of(ana), "title": "Equipo", "amount": "99999999999.999"},
    )

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "amount_too_large"
    assert [e["field"] for e in response.json()["problems"]] == ["amount"]
    assert not Opportunity.objects.exists()


def test_the_largest_amount_that_fits_after_rounding_is_accepted(api, ana):
    response = api.post(
        "opportunities",
        {"contact": reference_of(ana), "title": "Equipo", "amount": "99999999999.994"},
    )

    assert response.status_code == 201, response.content
    assert response.json()["amount"] == "99999999999.99"


@pytest.mark.parametrize(
    "starts_at",
    ["0001-01-01T00:00:00", "0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00", "1899-06-01T10:00"],
)
def test_an_instant_at_the_calendar_ends_is_refused_before_anything_runs(
    api, ana, service, marta, frozen_clock, starts_at
):
    body = {
        "contact": reference_of(ana),
        "service": reference_of(service),
        "professional": reference_of(marta),
        "starts_at": starts_at,
    }
    response = api.post("appointments", body)

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_date"
    assert [e["field"] for e in response.json()["problems"]] == ["starts_at"]


def test_a_reschedule_to_year_one_is_refused_too(api, frozen_clock):
    response = api.post("appointments/AP-7K2F9Q/reschedule", {"starts_at": "0001-01-01T00:00"})

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_date"


def test_an_oversized_body_is_413_like_the_tool_mirror(api):
    body = json.dumps({"first_name": "Ana", "last_name": "x" * 3_000_000})

    response = api.client.post(
        "/api/v1/contacts", data=body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1"
    )

    assert response.status_code == 413
    assert (response.json()["error_type"], response.json()["code"]) == (
        "VALIDATION",
        "body_too_large",
    )
