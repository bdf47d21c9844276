"""Seed 2's Idempotency-Key rules on the integration API: the header is required on every
write and checked; a retry replays the stored answer; another request under the same key is
a conflict; an old key is expired; keys belong to the company, not to one credential."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agenda.models import Appointment
from core.idempotency.engine import idempotency_records_purge
from core.models import Contact, IdempotencyRecord
from support.models import Case
from tests.integration.conftest import new_key, reference_of

pytestmark = pytest.mark.django_db

NEW_CONTACT = {"first_name": "Carla", "email": "carla@example.com"}


def test_a_write_without_the_header_is_refused_and_does_nothing(api):
    response = api.post("contacts", NEW_CONTACT, key=None)

    assert response.status_code == 422
    assert response.json()["code"] == "missing_idempotency_key"
    assert not Contact.objects.exists()


@pytest.mark.parametrize("key", ["", "-starts-with-dash", "has space", "x" * 129, "ñandú"])
def test_a_malformed_key_is_422_invalid_idempotency_key(api, key):
    response = api.post("contacts", NEW_CONTACT, key=key)

    assert response.status_code == 422
    assert response.json()["error_type"] == "VALIDATION"
    assert response.json()["code"] == "invalid_idempotency_key"
    assert not Contact.objects.exists()


@pytest.mark.parametrize("key", ["a", "3f7c1a52-9c1e-4b8d-8a41-2d5b6e7f9a01", "A._:-" + "9" * 123])
def test_keys_within_the_pattern_are_accepted(api, key):
    assert api.post("contacts", NEW_CONTACT, key=key).status_code == 201


def test_a_retry_replays_the_original_status_and_body_and_says_so(api):
    key = new_key()
    first = api.post("contacts", NEW_CONTACT, key=key)
    retry = api.post("contacts", {"email": "carla@example.com", "first_name": "Carla"}, key=key)

    assert first.status_code == retry.status_code == 201
    assert "X-Idempotency-Replayed" not in first.headers
    assert retry.headers["X-Idempotency-Replayed"] == "true"
    assert retry.content == first.content
    assert Contact.objects.count() == 1


def test_the_same_key_with_another_body_is_409_idempotency_conflict(api):
    key = new_key()
    api.post("contacts", NEW_CONTACT, key=key)

    response = api.post("contacts", NEW_CONTACT | {"last_name": "Ruiz"}, key=key)

    assert response.status_code == 409
    assert (response.json()["error_type"], response.json()["code"]) == (
        "CONFLICT",
        "idempotency_conflict",
    )
    assert Contact.objects.count() == 1


def test_an_omitted_field_and_its_default_value_are_different_requests(api, company, ana):
    key = new_key()
    body = {"contact": reference_of(ana), "subject": "Grifo", "description": "Gotea"}
    assert api.post("cases", body, key=key).status_code == 201

    response = api.post("cases", body | {"priority": "normal"}, key=key)

    assert response.status_code == 409


def test_the_same_key_on_another_target_or_route_is_a_conflict(api, company, ana):
    body = {"contact": reference_of(ana), "subject": "Grifo", "description": "Gotea"}
    one = api.post("cases", body).json()["reference"]
    two = api.post("cases", body).json()["reference"]
    key = new_key()
    assert api.post(f"cases/{one}/start", key=key).status_code == 200

    other_target = api.post(f"cases/{two}/start", key=key)
    other_route = api.post(f"cases/{one}/resolve", key=key)

    assert other_target.status_code == other_route.status_code == 409
    assert Case.objects.get(reference=two).state == Case.State.OPEN


def test_the_stored_operation_is_the_method_and_route_with_the_target_in_the_fingerprint(
    api, company, ana
):
    body = {"contact": reference_of(ana), "subject": "Grifo", "description": "Gotea"}
    case = api.post("cases", body).json()["reference"]
    api.post(f"cases/{case}/start", key="op-1")

    record = IdempotencyRecord.objects.get(company=company, key="op-1")
    assert record.operation == "POST /api/v1/cases/{reference}/start"
    assert record.status_code == 200


def test_keys_are_shared_by_every_credential_of_the_company(api, company, make_api):
    key = new_key()
    first = api.post("contacts", NEW_CONTACT, key=key)

    retry = make_api(company).post("contacts", NEW_CONTACT, key=key)

    assert retry.status_code == 201
    assert retry.headers["X-Idempotency-Replayed"] == "true"
    assert retry.content == first.content


def test_another_company_has_its_own_key_namespace(api, other_api):
    key = new_key()
    mine = api.post("contacts", NEW_CONTACT, key=key)
    theirs = other_api.post("contacts", NEW_CONTACT, key=key)

    assert mine.status_code == theirs.status_code == 201
    assert "X-Idempotency-Replayed" not in theirs.headers
    assert Contact.objects.count() == 2


def test_a_failed_write_is_not_stored_so_the_same_key_may_run_once_fixed(api, company, ana):
    key = new_key()
    body = {"contact": reference_of(ana), "subject": "", "description": "Gotea"}
    refused = api.post("cases", body, key=key)

    done = api.post("cases", body | {"subject": "Grifo"}, key=key)

    assert refused.status_code == 422
    assert done.status_code == 201
    assert "X-Idempotency-Replayed" not in done.headers


def test_a_refused_transition_leaves_the_key_free(api, company, ana, service, marta, frozen_clock):
    body = {
        "contact": reference_of(ana),
        "service": reference_of(service),
        "professional": reference_of(marta),
        "starts_at": "2026-12-08T10:00:00",
    }
    reference = api.post("appointments", body).json()["reference"]
    api.post(f"appointments/{reference}/cancel")
    key = new_key()

    first = api.post(f"appointments/{reference}/cancel", key=key)
    second = api.post(f"appointments/{reference}/cancel", key=key)

    assert first.status_code == second.status_code == 422
    assert "X-Idempotency-Replayed" not in second.headers
    assert not IdempotencyRecord.objects.filter(company=company, key=key).exists()
    assert Appointment.objects.get(reference=reference).state == Appointment.State.CANCELLED


def test_past_the_replay_window_the_key_is_410_idempotency_expired(api, company, settings):
    key = new_key()
    api.post("contacts", NEW_CONTACT, key=key)
    window = settings.GARANTE_IDEMPOTENCY_REPLAY_WINDOW
    idempotency_records_purge(now=timezone.now() + window + timedelta(minutes=1))

    response = api.post("contacts", NEW_CONTACT, key=key)

    assert response.status_code == 410
    assert (response.json()["error_type"], response.json()["code"]) == (
        "CONFLICT",
        "idempotency_expired",
    )
    assert Contact.objects.count() == 1


def test_a_read_only_credential_cannot_replay_a_write_either(api, read_api):
    key = new_key()
    api.post("contacts", NEW_CONTACT, key=key)

    response = read_api.post("contacts", NEW_CONTACT, key=key)

    assert response.status_code == 403
    assert response.json()["code"] == "read_only_credential"
