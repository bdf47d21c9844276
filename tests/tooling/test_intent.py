"""Above the key (issue 48, item 1): a re-planned call, with a new idempotency key and other
wording, finds what the first call did (core.idempotency.intent), over the REST mirror of a
live server as the Gateway calls it. The intent is structured fields plus the customer and
the company; an intent that differs in one field is another request, never merged."""

import uuid

import pytest
from django.core import mail

from agenda.models import Appointment, AppointmentMessage
from agenda.services import professional_create
from core.idempotency import Done, Intent, intent_text, once_per_intent
from core.models import Company
from sales.models import Opportunity, Quote
from support.models import Case
from support.services import case_resolve, case_start
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, BRUNO_DOCUMENT, WEEKDAYS, split_shift

pytestmark = pytest.mark.django_db(transaction=True)

BASKET = [{"sku": "CAF-001", "quantity": 3}, {"sku": "TAZ-002", "quantity": 2}]


def call(client, tool, arguments, *, conversation_id=None):
    """One call with a key of its own, as a model that re-plans (or a client that mints a key
    per call) sends it."""
    return client.call(
        tool, arguments, key=f"k-{uuid.uuid4().hex}", conversation_id=conversation_id
    )


def first_slots(client, day="2026-12-08", **arguments):
    arguments = {"service": "Corte de pelo", "from": day, "to": day, "limit": 20} | arguments
    found = client.call("find_available_slots", arguments)
    assert found.status_code == 200, found.text
    return found.json()["items"]


def book(client, slot, identifier=ANA_DOCUMENT):
    return call(
        client,
        "book_appointment",
        {"identifier": identifier, "service": "Corte de pelo", "slot": slot},
    )


# --- the intent itself ---------------------------------------------------------------------------


def test_an_intent_is_its_fields_whatever_their_order_and_always_its_company_and_customer():
    company, other = Company(pk=1), Company(pk=2)
    ana, bruno = type("C", (), {"pk": 10})(), type("C", (), {"pk": 11})()
    one = Intent.of("create_quote", company=company, contact=ana, lines=[["A", 1]], x=1)
    same = Intent.of("create_quote", company=company, contact=ana, x=1, lines=[["A", 1]])
    assert one.lock_key == same.lock_key
    others = [
        Intent.of("create_quote", company=other, contact=ana, lines=[["A", 1]], x=1),
        Intent.of("create_quote", company=company, contact=bruno, lines=[["A", 1]], x=1),
        Intent.of("create_quote", company=company, contact=ana, lines=[["A", 2]], x=1),
        Intent.of("open_case", company=company, contact=ana, lines=[["A", 1]], x=1),
    ]
    assert len({one.lock_key, *(o.lock_key for o in others)}) == 5
    assert intent_text("  ¡Reforma de la COCINA!  ") == intent_text("reforma de la cocina")


def test_a_make_that_looks_itself_is_answered_by_find_only_when_it_made_nothing(company, ana):
    """`make_looks`: make looks in its own statement and returns None when the intent's
    record stands; find reads it then. A record make saw but find no longer finds (cancelled
    or resolved by staff in between, who do not take the intent's lock) stands no more:
    make runs again."""
    intent = Intent.of("open_case", company=company, contact=ana)
    finds: list[str] = []

    def find() -> str | None:
        finds.append("find")
        return None

    made = once_per_intent(intent, find=find, make=lambda: "new", held=True, make_looks=True)
    standing = once_per_intent(
        intent, find=lambda: "standing", make=lambda: None, held=True, make_looks=True
    )
    makes = iter([None, "again"])
    vanished = once_per_intent(
        intent, find=find, make=lambda: next(makes), held=True, make_looks=True
    )

    assert made == Done("new", already_done=False)
    assert standing == Done("standing", already_done=True)
    assert vanished == Done("again", already_done=False)
    assert finds == ["find"]  # the first call never looked: make had made its record


# --- book_appointment ----------------------------------------------------------------------------


def test_a_booking_re_planned_with_a_new_key_answers_the_appointment_it_made(
    ana_client, marta, frozen_clock
):
    """The issue's case: the same slot booked again with a new key answered slot_taken,
    taken by the very appointment this conversation had booked. Now it answers that one, by
    its reference or by the date and time the slot was shown with."""
    slot = first_slots(ana_client)[0]

    first = book(ana_client, slot["slot"])
    again = book(ana_client, f"{slot['date']} {slot['time']}")

    assert first.status_code == again.status_code == 200, again.text
    assert first.json()["already_done"] is False
    body = again.json()
    assert body["already_done"] is True
    assert body["appointment"] == first.json()["appointment"]
    assert {k: v for k, v in body.items() if k != "already_done"} == {
        k: v for k, v in first.json().items() if k != "already_done"
    }
    assert Appointment.objects.count() == 1
    booked = AppointmentMessage.objects.filter(kind=AppointmentMessage.Kind.BOOKED)
    assert booked.count() == 1  # no second confirmation


def test_one_customer_booking_two_professionals_at_one_time_is_not_merged_into_one(
    ana_client, marta, service, company, frozen_clock
):
    """Another professional at the same time is another intent: never answered with the
    first appointment. (The agenda then refuses a customer two appointments at once, as it
    did before: a typed refusal, not a merge.)"""
    professional_create(
        company=company, display_name="Luis", services=[service], weekly_hours=split_shift(WEEKDAYS)
    )
    at_nine = [s for s in first_slots(ana_client) if s["time"] == "09:00"]
    assert {s["professional"] for s in at_nine} == {"Marta", "Luis"}

    first, second = (book(ana_client, s["slot"]) for s in at_nine)

    assert first.json()["already_done"] is False
    assert second.status_code == 422, second.text
    assert second.json()["code"] == "appointment_overlap"
    assert Appointment.objects.count() == 1


def test_a_re_planned_booking_of_another_slot_books_it_and_merges_nothing(
    ana_client, marta, frozen_clock
):
    """Bad input: a re-planned call whose intent differs in one field (the start)."""
    slots = first_slots(ana_client)

    first = book(ana_client, slots[0]["slot"])
    other = book(ana_client, slots[3]["slot"])

    assert other.status_code == 200, other.text
    assert other.json()["already_done"] is False
    assert other.json()["appointment"] != first.json()["appointment"]
    assert Appointment.objects.count() == 2


def test_a_cancelled_booking_is_no_longer_what_the_intent_stands_for(
    ana_client, marta, frozen_clock
):
    slot = first_slots(ana_client)[0]["slot"]
    first = book(ana_client, slot).json()
    cancelled = call(
        ana_client,
        "cancel_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": first["appointment"]},
    )
    assert cancelled.status_code == 200

    again = book(ana_client, slot)

    assert again.status_code == 200, again.text
    assert again.json()["already_done"] is False
    assert again.json()["appointment"] != first["appointment"]


# --- reschedule_appointment ----------------------------------------------------------------------


def test_a_move_re_planned_with_a_new_key_moves_nothing_and_sends_nothing_again(
    ana_client, marta, frozen_clock
):
    booked = book(ana_client, first_slots(ana_client)[0]["slot"]).json()
    to = first_slots(ana_client, appointment=booked["appointment"])[4]
    move = {"identifier": ANA_DOCUMENT, "appointment": booked["appointment"], "slot": to["slot"]}

    first = call(ana_client, "reschedule_appointment", move)
    again = call(ana_client, "reschedule_appointment", move)

    assert first.status_code == again.status_code == 200, again.text
    assert (first.json()["already_done"], again.json()["already_done"]) == (False, True)
    assert again.json()["time"] == to["time"] == first.json()["time"]
    moved = AppointmentMessage.objects.filter(kind=AppointmentMessage.Kind.MOVED)
    assert moved.count() == 1


# --- create_quote --------------------------------------------------------------------------------


@pytest.fixture
def anas_quotes(ana_client, catalog, company):
    from core.models import StepUpPolicy

    StepUpPolicy.objects.create(company=company, actions=[])
    return ana_client


def test_a_quote_re_planned_with_a_new_key_answers_the_quote_already_sent(anas_quotes):
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    # Re-planned: lines in another order, a SKU split in two and spelled in lower case.
    reworded = [
        {"sku": "taz-002", "quantity": 1},
        {"sku": "CAF-001", "quantity": 3},
        {"sku": "TAZ-002", "quantity": 1},
    ]
    again = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": reworded})

    assert first.status_code == again.status_code == 200, again.text
    assert (first.json()["already_done"], again.json()["already_done"]) == (False, True)
    assert again.json()["reference"] == first.json()["reference"]
    assert again.json()["total"] == first.json()["total"]
    assert Quote.objects.count() == 1
    assert [m.to for m in mail.outbox] == [[ANA_EMAIL]]  # emailed once


def test_a_re_planned_quote_is_held_to_the_total_the_model_told(anas_quotes):
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    total = first.json()["total"]

    wrong = call(
        anas_quotes,
        "create_quote",
        {"identifier": ANA_DOCUMENT, "items": BASKET, "expected_total": "1.00"},
    )
    right = call(
        anas_quotes,
        "create_quote",
        {"identifier": ANA_DOCUMENT, "items": BASKET, "expected_total": total},
    )

    assert wrong.status_code == 422, wrong.text
    assert (wrong.json()["code"], wrong.json()["total"]) == ("total_mismatch", total)
    assert right.json()["already_done"] is True
    assert Quote.objects.count() == 1


@pytest.mark.parametrize(
    "items",
    [
        [{"sku": "CAF-001", "quantity": 3}, {"sku": "TAZ-002", "quantity": 1}],  # a quantity
        [{"sku": "CAF-001", "quantity": 3}],  # a line fewer
        [*BASKET, {"sku": "MOL-003", "quantity": 1}],  # a line more
    ],
)
def test_a_re_planned_quote_with_other_lines_is_another_quote(anas_quotes, items):
    """Bad input: a re-planned call whose intent differs in one field (its lines)."""
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})

    other = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": items})

    assert other.status_code == 200, other.text
    assert other.json()["already_done"] is False
    assert other.json()["reference"] != first.json()["reference"]
    assert Quote.objects.count() == 2


def test_a_customer_who_wants_a_second_identical_quote_says_so(anas_quotes):
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    second = call(
        anas_quotes,
        "create_quote",
        {"identifier": ANA_DOCUMENT, "items": BASKET, "new_quote": True},
    )

    assert second.json()["already_done"] is False
    assert second.json()["reference"] != first.json()["reference"]
    assert Quote.objects.count() == 2


def test_two_customers_asking_the_same_quote_get_one_each(
    anas_quotes, bruno, make_identified, company
):
    """The seed's warning: deduplicating on the arguments alone would merge two customers."""
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    brunos = f"conv-{uuid.uuid4().hex[:8]}"
    make_identified(bruno, brunos)

    his = call(
        anas_quotes,
        "create_quote",
        {"identifier": BRUNO_DOCUMENT, "items": BASKET},
        conversation_id=brunos,
    )

    assert his.status_code == 200, his.text
    assert his.json()["already_done"] is False
    assert his.json()["reference"] != first.json()["reference"]


def test_the_quote_window_is_the_companys(anas_quotes, company):
    call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    Quote.objects.update(created_at=Quote.objects.get().created_at.replace(year=2020))

    after_the_window = call(
        anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET}
    )
    assert after_the_window.json()["already_done"] is False

    company.refresh_from_db()
    company.quote_intent_window_minutes = 0
    company.save()  # as the admin saves it (core.signals forgets the cached company)
    window_off = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    assert window_off.json()["already_done"] is False
    assert Quote.objects.count() == 3


def test_a_quote_no_longer_open_is_not_answered_again(anas_quotes):
    first = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})
    rejected = call(
        anas_quotes,
        "reject_quote",
        {"identifier": ANA_DOCUMENT, "quote": first.json()["reference"]},
    )
    assert rejected.status_code == 200, rejected.text

    again = call(anas_quotes, "create_quote", {"identifier": ANA_DOCUMENT, "items": BASKET})

    assert again.json()["already_done"] is False


# --- request_sales_contact -----------------------------------------------------------------------


def test_a_sales_request_re_planned_with_other_wording_answers_the_open_one(
    ana_client, company, make_staff
):
    make_staff("sara", role="supervisor", email="sara@sol.example")
    first = call(
        ana_client,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": "Reforma de la cocina"},
    )
    again = call(
        ana_client,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": " reforma de la COCINA. ", "notes": "Urgente"},
    )
    other = call(
        ana_client,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": "Reforma del baño"},
    )

    assert first.status_code == again.status_code == other.status_code == 200, again.text
    assert (first.json()["already_done"], again.json()["already_done"]) == (False, True)
    assert again.json()["reference"] == first.json()["reference"]
    assert other.json()["already_done"] is False  # another topic: another request
    assert Opportunity.objects.count() == 2
    explicit = call(
        ana_client,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": "Reforma de la cocina", "new_request": True},
    )
    assert explicit.json()["already_done"] is False
    assert Opportunity.objects.count() == 3


# --- open_case -----------------------------------------------------------------------------------


def test_a_second_case_soon_after_is_a_possible_duplicate_naming_the_open_one(
    ana_client, make_staff
):
    """The issue's case: open_case with a new key, same conversation, opened a second case
    and emailed staff twice. A reworded description would have done the same."""
    make_staff("marta", email="marta@sol.example")
    opened = call(
        ana_client,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "No enciende", "description": "La tele."},
    )
    again = call(
        ana_client,
        "open_case",
        {
            "identifier": ANA_DOCUMENT,
            "subject": "La televisión no se enciende",
            "description": "Desde ayer la tele no enciende.",
        },
    )

    assert opened.status_code == 200
    assert again.status_code == 409, again.text
    body = again.json()
    assert (body["error_type"], body["code"]) == ("CONFLICT", "possible_duplicate")
    assert body["case"] == opened.json()["reference"]
    assert body["subject"] == "No enciende"
    assert body["state"] == "open"
    assert opened.json()["reference"] in body["user_message"]
    assert Case.objects.count() == 1
    assert len(mail.outbox) == 1  # staff told once

    explicit = call(
        ana_client,
        "open_case",
        {
            "identifier": ANA_DOCUMENT,
            "subject": "Factura",
            "description": "Me cobraron dos veces.",
            "new_case": True,
        },
    )
    assert explicit.status_code == 200, explicit.text
    assert Case.objects.count() == 2


def test_once_the_open_case_is_resolved_a_new_case_opens(ana_client):
    opened = call(
        ana_client,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Ruido", "description": "Hace ruido."},
    )
    case = Case.objects.get(reference=opened.json()["reference"])
    case_resolve(case=case_start(case=case))

    again = call(
        ana_client,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Ruido", "description": "Vuelve el ruido."},
    )

    assert again.status_code == 200, again.text
    assert Case.objects.count() == 2


def test_another_customers_open_case_is_no_duplicate(ana_client, bruno, make_identified):
    call(
        ana_client,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Ruido", "description": "Hace ruido."},
    )
    brunos = f"conv-{uuid.uuid4().hex[:8]}"
    make_identified(bruno, brunos)

    his = call(
        ana_client,
        "open_case",
        {"identifier": BRUNO_DOCUMENT, "subject": "Ruido", "description": "Hace ruido."},
        conversation_id=brunos,
    )

    assert his.status_code == 200, his.text
    assert Case.objects.count() == 2
