"""The sales tools over real HTTP (the REST mirror of a live server), as the Gateway calls them."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone

from core.models import Conversation, StepUpPolicy
from sales.models import Opportunity, Product, Quote
from sales.services.catalog import price_list_item_set
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_create,
    quote_expire,
    quote_reject,
    quotes_expire_due,
)
from sales.services.quote_pricing import QuoteItem
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, BRUNO_DOCUMENT
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

BASKET = [{"sku": "CAF-001", "quantity": 3}, {"sku": "TAZ-002", "quantity": 2}]  # 53.33 EUR


def verify(conversation: Conversation) -> None:
    """What a successful verify_code leaves behind: the conversation verified for a while."""
    now = timezone.now()
    Conversation.objects.filter(pk=conversation.pk).update(
        verified_at=now, verified_until=now + timedelta(minutes=15)
    )


def key() -> str:
    return f"k-{uuid.uuid4().hex}"


@pytest.fixture
def anas_chat(tool_client, ana, catalog, make_identified):
    """Ana identified in the tool client's conversation, with the company's default policy."""
    return make_identified(ana, tool_client.conversation_id)


@pytest.fixture
def no_step_up(company):
    StepUpPolicy.objects.create(company=company, actions=[])


def create(tool_client, items=BASKET, **extra):
    return tool_client.call(
        "create_quote", {"identifier": ANA_DOCUMENT, "items": items, **extra}, key=key()
    )


# --- search_products -----------------------------------------------------------------------------


def test_search_shows_name_sku_price_and_availability_but_never_quantities(tool_client, catalog):
    response = tool_client.call("search_products", {"query": ""})

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "items": [
            {
                "sku": "CAF-001",
                "name": "Café en grano 1 kg",
                "unit": "unidad",
                "unit_price": "12.50",
                "in_stock": True,
            },
            {
                "sku": "MOL-003",
                "name": "Molinillo manual",
                "unit": "unidad",
                "unit_price": "35.00",
                "in_stock": True,
            },
            {
                "sku": "TAZ-002",
                "name": "Taza de cerámica",
                "unit": "unidad",
                "unit_price": "4.99",
                "in_stock": True,
            },
        ],
        "count": 3,
        "has_more": False,
        "currency": "EUR",
        "next_cursor": None,
    }


def test_search_matches_words_and_says_out_of_stock(tool_client, company, ana, catalog):
    quote_accept(quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 3)]))

    body = tool_client.call("search_products", {"query": "taza cerámica"}).json()

    assert [(p["sku"], p["in_stock"]) for p in body["items"]] == [("TAZ-002", False)]


def test_a_search_without_results_is_a_success_with_an_empty_list(tool_client, catalog):
    response = tool_client.call("search_products", {"query": "bicicleta"})

    assert response.status_code == 200
    assert response.json()["items"] == []


def test_search_honours_the_limit_and_says_more_exist(tool_client, catalog):
    body = tool_client.call("search_products", {"limit": 2}).json()

    assert body["count"] == 2
    assert body["has_more"] is True


# --- create_quote --------------------------------------------------------------------------------


def test_create_quote_prices_it_sends_it_and_emails_the_customer(tool_client, anas_chat):
    response = create(tool_client)

    assert response.status_code == 200
    body = response.json()
    assert body["reference"].startswith("QT-")
    assert (body["state"], body["state_label"], body["total"], body["subtotal"], body["tax"]) == (
        "sent",
        "enviada",
        "53.33",
        "47.48",
        "5.85",
    )
    assert body["emailed_to"] == "a***@example.com"
    assert body["lines"][1] == {
        "sku": "TAZ-002",
        "name": "Taza de cerámica",
        "quantity": 2,
        "unit_price_excl_tax": "4.99",
        "tax_rate": "21.00",
        # Tax excluded, like the unit price: the lines add up to "subtotal".
        "subtotal_excl_tax": "9.98",
        "tax": "2.10",
        "total_incl_tax": "12.08",  # the lines tax included add up to "total"
    }
    lines = body["lines"]
    assert sum(Decimal(line["subtotal_excl_tax"]) for line in lines) == Decimal(body["subtotal"])
    assert sum(Decimal(line["total_incl_tax"]) for line in lines) == Decimal(body["total"])
    assert set(body) == {
        "reference",
        "state",
        "state_label",
        "total",
        "currency",
        "valid_until",
        "created",
        "lines",
        "subtotal",
        "tax",
        "emailed_to",
        "already_done",
    }
    assert [m.to for m in mail.outbox] == [[ANA_EMAIL]]
    assert body["reference"] in mail.outbox[0].subject
    quote = Quote.objects.get(reference=body["reference"])
    assert quote.conversation == anas_chat


def test_create_quote_refuses_an_altered_total_and_states_the_real_one(tool_client, anas_chat):
    response = create(tool_client, expected_total="50.00")

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["code"], body["total"], body["currency"]) == (
        "VALIDATION",
        "total_mismatch",
        "53.33",
        "EUR",
    )
    assert not Quote.objects.exists()


def test_the_same_create_quote_key_creates_one_quote(tool_client, anas_chat):
    args = {"identifier": ANA_DOCUMENT, "items": BASKET, "expected_total": "53.33"}
    same = key()

    first = tool_client.call("create_quote", args, key=same)
    second = tool_client.call("create_quote", args, key=same)

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert second.headers["X-Idempotency-Replayed"] == "true"
    assert Quote.objects.count() == 1
    assert len(mail.outbox) == 1


def test_create_quote_needs_an_identified_customer(tool_client, catalog):
    response = create(tool_client)

    assert response.status_code == 403
    assert response.json()["code"] == "identification_required"


def test_create_quote_refuses_another_customers_identifier(tool_client, anas_chat, bruno):
    response = tool_client.call(
        "create_quote", {"identifier": BRUNO_DOCUMENT, "items": BASKET}, key=key()
    )

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"
    assert not Quote.objects.exists()


def test_create_quote_of_an_unknown_product_is_not_found(tool_client, anas_chat):
    response = create(tool_client, items=[{"sku": "NOPE", "quantity": 1}])

    assert response.status_code == 404
    assert response.json()["sku"] == "NOPE"


def test_create_quote_refuses_a_zero_quantity(tool_client, anas_chat):
    response = create(tool_client, items=[{"sku": "CAF-001", "quantity": 0}])

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_arguments"


def test_a_total_too_large_to_record_is_validation_not_an_outage(tool_client, anas_chat, catalog):
    """10,000 units at 25,000,000 each (a price in pesos): the total has more digits than the
    money columns hold. Refused as such, so the agent asks for less instead of "try later"."""
    price_list_item_set(
        price_list=catalog.price_list, product=catalog.grinder, unit_price="25000000.00"
    )

    response = create(tool_client, items=[{"sku": "MOL-003", "quantity": 10_000}])

    assert response.status_code == 422, response.text
    assert response.json()["code"] == "amount_too_large"
    assert not Quote.objects.exists()
    assert create(tool_client, items=[{"sku": "MOL-003", "quantity": 2}]).status_code == 200


# --- list_my_quotes / get_quote ------------------------------------------------------------------


def test_list_my_quotes_shows_only_the_customers_own(tool_client, company, bruno, anas_chat):
    mine = create(tool_client).json()["reference"]
    quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])

    body = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT}).json()

    assert [q["reference"] for q in body["items"]] == [mine]
    assert set(body["items"][0]) == {
        "reference",
        "state",
        "state_label",
        "total",
        "currency",
        "valid_until",
        "created",
    }


def test_a_quote_past_validity_is_listed_as_expired_before_the_sweep(
    tool_client, company, ana, anas_chat
):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() - timedelta(minutes=1))

    expired = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT, "state": "expired"})
    sent = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT, "state": "sent"})

    assert [(q["reference"], q["state"], q["state_label"]) for q in expired.json()["items"]] == [
        (quote.reference, "expired", "vencida")
    ]
    assert sent.json()["items"] == []


def test_list_my_quotes_filters_by_state_value_or_spanish_label(
    tool_client, company, ana, anas_chat
):
    kept = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    rejected = quote_reject(
        quote=quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 2)])
    )

    def listed(state: str) -> list[str]:
        response = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT, "state": state})
        assert response.status_code == 200, response.text
        return [q["reference"] for q in response.json()["items"]]

    assert listed("rejected") == listed("Rechazada") == [rejected.reference]
    assert listed("sent") == listed("enviada") == [kept.reference]


def test_list_my_quotes_refuses_drafts_and_unknown_states_as_a_filter(tool_client, anas_chat):
    schema = registry.get("list_my_quotes").input_schema["properties"]["state"]

    for state in ("draft", "borrador", "pendiente"):
        response = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT, "state": state})
        assert response.status_code == 422, state
        assert response.json()["code"] == "invalid_arguments"
    assert schema["anyOf"][0]["enum"] == [
        "sent",
        "accepted",
        "rejected",
        "expired",
        "superseded",
        "delivered",
        "cancelled",
    ]


def test_a_draft_staff_withdrew_before_sending_is_never_shown_to_the_customer(
    tool_client, company, ana, anas_chat, no_step_up
):
    draft = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)], send=False)
    quote_expire(quote=draft)  # withdrawn: expired, yet never sent

    listed = tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT}).json()
    shown = tool_client.call("get_quote", {"identifier": ANA_DOCUMENT, "quote": draft.reference})

    assert listed["items"] == []
    assert shown.status_code == 404, shown.json()


def test_a_stale_draft_the_sweep_expired_is_not_listed_as_expired(
    tool_client, company, ana, anas_chat
):
    draft = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)], send=False)
    Quote.objects.filter(pk=draft.pk).update(valid_until=timezone.now() - timedelta(minutes=1))
    assert quotes_expire_due() == 1

    listed = tool_client.call(
        "list_my_quotes", {"identifier": ANA_DOCUMENT, "state": "expired"}
    ).json()

    assert listed["items"] == []


def test_another_customers_withdrawn_draft_is_unknown_not_someone_elses(
    tool_client, company, bruno, anas_chat, no_step_up
):
    """A reference the customer never received answers as unknown, never as "not yours":
    that would confirm that staff drafted something for another customer."""
    draft = quote_create(
        company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)], send=False
    )
    quote_expire(quote=draft)

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": draft.reference}, key=key()
    )

    assert response.status_code == 422
    assert response.json()["code"] == "reference_not_seen"


def test_get_quote_finds_the_customers_quote_by_its_reference(tool_client, company, ana, anas_chat):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 2)])

    body = tool_client.call(
        "get_quote", {"identifier": ANA_DOCUMENT, "quote": quote.reference}
    ).json()

    assert (body["reference"], body["total"], len(body["lines"])) == (quote.reference, "27.50", 1)


def test_get_quote_of_another_customer_is_refused(tool_client, company, bruno, anas_chat):
    brunos = quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])

    response = tool_client.call(
        "get_quote", {"identifier": ANA_DOCUMENT, "quote": brunos.reference}
    )

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"
    assert brunos.reference not in response.text


def test_get_quote_of_an_unknown_reference_is_not_found(tool_client, anas_chat):
    response = tool_client.call("get_quote", {"identifier": ANA_DOCUMENT, "quote": "QT-ZZZZZZ"})

    assert response.status_code == 404


# --- accept_quote --------------------------------------------------------------------------------


def reserved(sku: str) -> int:
    return Product.objects.get(sku=sku).quantity_reserved


def test_accepting_needs_step_up_verification_by_default(tool_client, anas_chat):
    reference = create(tool_client).json()["reference"]

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key()
    )

    assert response.status_code == 403
    assert response.json()["code"] == "verification_required"
    assert reserved("CAF-001") == 0

    verify(anas_chat)
    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key()
    )
    assert response.status_code == 200
    assert response.json()["state"] == "accepted"


def test_accepting_twice_with_the_same_key_reserves_once(tool_client, anas_chat, no_step_up):
    reference = create(tool_client).json()["reference"]
    args = {"identifier": ANA_DOCUMENT, "quote": reference, "expected_total": "53.33"}
    same = key()

    first = tool_client.call("accept_quote", args, key=same)
    second = tool_client.call("accept_quote", args, key=same)

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert first.json()["state"] == "accepted"
    assert (reserved("CAF-001"), reserved("TAZ-002")) == (3, 2)


def test_accepting_again_with_a_new_key_is_refused_with_the_state(
    tool_client, anas_chat, no_step_up
):
    reference = create(tool_client).json()["reference"]
    tool_client.call("accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key())

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key()
    )

    assert response.status_code == 422
    assert response.json()["state"] == "accepted"
    assert response.json()["state_label"] == "aceptada"
    assert response.json()["user_message"] == "Esa cotización ya fue aceptada."
    assert reserved("CAF-001") == 3


def test_accepting_with_an_altered_total_is_refused_with_the_real_one(
    tool_client, anas_chat, no_step_up
):
    reference = create(tool_client).json()["reference"]

    response = tool_client.call(
        "accept_quote",
        {"identifier": ANA_DOCUMENT, "quote": reference, "expected_total": "43.33"},
        key=key(),
    )

    assert response.status_code == 422
    assert response.json()["total"] == "53.33"
    assert reserved("CAF-001") == 0


def test_accepting_another_customers_quote_is_refused(
    tool_client, company, bruno, anas_chat, no_step_up
):
    brunos = quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": brunos.reference}, key=key()
    )

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"
    brunos.refresh_from_db()
    assert brunos.state == Quote.State.SENT


def test_accepting_a_quote_this_conversation_never_saw_is_refused(
    tool_client, company, ana, anas_chat, no_step_up
):
    # Ana's own quote, but from another conversation: this one has not been shown it.
    unseen = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": unseen.reference}, key=key()
    )

    assert response.status_code == 422
    assert response.json()["code"] == "reference_not_seen"
    assert reserved("CAF-001") == 0


def test_a_quote_listed_in_this_conversation_can_be_accepted_by_the_end_of_its_reference(
    tool_client, company, ana, anas_chat, no_step_up
):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    tool_client.call("list_my_quotes", {"identifier": ANA_DOCUMENT})

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": quote.reference[-4:]}, key=key()
    )

    assert response.status_code == 200
    assert response.json()["reference"] == quote.reference


def test_accepting_an_expired_quote_is_refused_with_the_state(tool_client, anas_chat, no_step_up):
    reference = create(tool_client).json()["reference"]
    quotes_expire_due(now=timezone.now() + timedelta(days=30))

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key()
    )

    assert response.status_code == 422
    assert (response.json()["error_type"], response.json()["state"]) == ("VALIDATION", "expired")
    assert response.json()["state_label"] == "vencida"


def test_accepting_after_another_customer_took_the_stock_is_refused(
    tool_client, company, bruno, anas_chat, no_step_up
):
    reference = create(tool_client, items=[{"sku": "TAZ-002", "quantity": 2}]).json()["reference"]
    quote_accept(
        quote=quote_create(company=company, contact=bruno, items=[QuoteItem("TAZ-002", 2)])
    )

    response = tool_client.call(
        "accept_quote", {"identifier": ANA_DOCUMENT, "quote": reference}, key=key()
    )

    assert response.status_code == 422
    assert (response.json()["code"], response.json()["sku"]) == ("insufficient_stock", "TAZ-002")
    assert reserved("TAZ-002") == 2


# --- reject_quote / request_sales_contact --------------------------------------------------------


def test_rejecting_resolves_the_quote_once(tool_client, anas_chat):
    reference = create(tool_client).json()["reference"]
    args = {"identifier": ANA_DOCUMENT, "quote": reference, "reason": "Prefiero esperar"}

    first = tool_client.call("reject_quote", args, key=key())
    again = tool_client.call("reject_quote", args, key=key())

    assert (first.status_code, first.json()["state"]) == (200, "rejected")
    assert (again.status_code, again.json()["state"]) == (422, "rejected")
    assert Quote.objects.get(reference=reference).rejection_reason == "Prefiero esperar"


def test_request_sales_contact_opens_one_opportunity_per_key(tool_client, anas_chat):
    args = {
        "identifier": ANA_DOCUMENT,
        "topic": "Cafetera para oficina",
        "notes": "Unas 30 personas",
    }
    same = key()

    first = tool_client.call("request_sales_contact", args, key=same)
    second = tool_client.call("request_sales_contact", args, key=same)

    assert first.status_code == 200
    assert first.json() == second.json()
    assert first.json()["state"] == "new"
    assert first.json()["state_label"] == "nueva"
    assert set(first.json()) == {"reference", "state", "state_label", "already_done"}
    opportunity = Opportunity.objects.get()
    assert (opportunity.reference, opportunity.state) == (first.json()["reference"], "new")
    assert (opportunity.contact, opportunity.notes) == (anas_chat.contact, "Unas 30 personas")


def test_a_large_quote_still_answers_with_its_reference_within_the_cap(
    tool_client, company, anas_chat, catalog
):
    from sales.services.catalog import price_list_item_set, product_create

    items = []
    for n in range(20):
        product = product_create(
            company=company,
            sku=f"LRG-{n:03d}",
            name=f"Producto {n} " + "x" * 140,
            track_stock=False,
        )
        price_list_item_set(price_list=catalog.price_list, product=product, unit_price="1.00")
        items.append({"sku": product.sku, "quantity": 1})

    response = create(tool_client, items=items)

    assert response.status_code == 200
    assert len(response.text) <= 3000
    body = response.json()
    assert body["reference"].startswith("QT-")
    assert (body["line_count"], body["total"]) == (20, "24.20")
    assert "lines" not in body
