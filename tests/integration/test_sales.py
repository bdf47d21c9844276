"""Products, quotes and opportunities over the integration API: prices and totals computed by
the system, stock reserved at acceptance, every stage change through the sales services."""

import pytest
from django.utils import timezone

from core.services import contact_create
from sales.models import Opportunity, Product, Quote
from sales.services import opportunity_create
from sales.tools import QuoteLineOut
from tests.factories import BRUNO_PHONE
from tests.integration.conftest import new_key, reference_of

pytestmark = pytest.mark.django_db


def quote(api, ana, *items, **extra):
    body = {"contact": reference_of(ana), "items": [{"sku": s, "quantity": q} for s, q in items]}
    return api.post("quotes", body | extra)


def test_it_lists_products_with_current_prices_and_available_stock(api, catalog):
    body = api.get("products", active="true", ordering="sku").json()

    assert [p["sku"] for p in body["results"]] == ["CAF-001", "FIL-005", "MOL-003", "TAZ-002"]
    coffee = body["results"][0]
    assert (coffee["unit_price"], coffee["currency"], coffee["quantity_available"]) == (
        "12.50",
        "EUR",
        10,
    )
    assert body["results"][1]["unit_price"] is None  # not in the price list
    assert body["results"][2]["quantity_available"] is None  # stock not tracked


def test_a_product_is_found_by_its_sku_in_any_case(api, catalog):
    assert api.get("products/taz-002").json()["name"] == "Taza de cerámica"
    assert api.get("products/NOPE-1").status_code == 404


def test_a_sku_with_a_nul_character_is_not_found_not_an_outage(api, catalog):
    for path in ["products/%00", "products/TAZ%00-002"]:
        response = api.get(path)

        assert response.status_code == 404, response.content
        assert response.json()["error_type"] == "NOT_FOUND"


def test_a_quote_is_priced_by_the_system_and_sent(api, ana, catalog):
    response = quote(api, ana, ("CAF-001", 2), ("TAZ-002", 1))

    assert response.status_code == 201, response.content
    body = response.json()
    # 2 x 12.50 + 10 % = 27.50; 4.99 + 21 % = 6.04
    assert (body["subtotal"], body["tax_total"], body["total"]) == ("29.99", "3.55", "33.54")
    assert body["state"] == "sent"
    assert [(line["sku"], line["total_incl_tax"]) for line in body["lines"]] == [
        ("CAF-001", "27.50"),
        ("TAZ-002", "6.04"),
    ]


def test_a_wrong_expected_total_is_refused_with_the_real_one(api, ana, catalog):
    response = quote(api, ana, ("CAF-001", 2), expected_total="20.00")

    assert response.status_code == 422
    assert (response.json()["code"], response.json()["total"]) == ("total_mismatch", "27.50")
    assert not Quote.objects.exists()


def test_an_unknown_sku_is_not_found(api, ana, catalog):
    response = quote(api, ana, ("NOPE-1", 1))

    assert response.status_code == 404
    assert response.json()["code"] == "product_not_found"


def test_accepting_reserves_the_stock_and_a_second_acceptance_is_refused(api, ana, catalog):
    reference = quote(api, ana, ("TAZ-002", 3)).json()["reference"]

    accepted = api.post(f"quotes/{reference}/accept", {"expected_total": "18.11"})
    again = api.post(f"quotes/{reference}/accept")

    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["state"] == "accepted"
    assert Product.objects.get(sku="TAZ-002").quantity_reserved == 3
    assert again.status_code == 422
    assert (again.json()["code"], again.json()["state"]) == ("invalid_state", "accepted")


def test_stock_taken_by_another_acceptance_is_refused_at_the_moment(api, ana, catalog):
    first = quote(api, ana, ("TAZ-002", 2)).json()["reference"]
    second = quote(api, ana, ("TAZ-002", 2)).json()["reference"]
    api.post(f"quotes/{first}/accept")

    response = api.post(f"quotes/{second}/accept")

    assert response.status_code == 422
    assert response.json()["code"] == "insufficient_stock"
    assert Product.objects.get(sku="TAZ-002").quantity_reserved == 2


def test_a_draft_is_kept_then_sent_rejected_and_listed_by_state(api, ana, catalog):
    draft = quote(api, ana, ("CAF-001", 1), send=False).json()
    sent = api.post(f"quotes/{draft['reference']}/send").json()
    rejected = api.post(f"quotes/{draft['reference']}/reject", {"reason": "caro"}).json()

    assert (draft["state"], sent["state"], rejected["state"]) == ("draft", "sent", "rejected")
    assert rejected["rejection_reason"] == "caro"
    listed = api.get("quotes", state="rejected", contact=reference_of(ana)).json()
    assert [q["reference"] for q in listed["results"]] == [draft["reference"]]


def test_a_quote_can_be_linked_only_to_the_same_contacts_opportunity(api, company, ana, catalog):
    bruno = contact_create(company=company, first_name="Bruno", phone=BRUNO_PHONE)
    opportunity = opportunity_create(company=company, contact=bruno, title="Cafetera")

    response = quote(api, ana, ("CAF-001", 1), opportunity=opportunity.reference)

    assert response.status_code == 422
    assert response.json()["code"] == "opportunity_of_another_contact"


def test_an_opportunity_moves_through_the_pipeline_and_stays_closed(api, ana):
    created = api.post(
        "opportunities", {"contact": reference_of(ana), "title": "Cafetera", "amount": "1200.5"}
    )
    reference = created.json()["reference"]

    stages = [
        api.post(f"opportunities/{reference}/{step}").json()["state"]
        for step in ("qualify", "propose", "negotiate")
    ]
    lost = api.post(f"opportunities/{reference}/lose", {"reason": "precio"})
    won = api.post(f"opportunities/{reference}/win")

    assert created.status_code == 201
    assert (created.json()["amount"], created.json()["currency"]) == ("1200.50", "EUR")
    assert stages == ["qualified", "proposal", "negotiation"]
    assert lost.json()["lost_reason"] == "precio"
    assert won.status_code == 422
    assert won.json()["state"] == "lost"
    assert Opportunity.objects.get(reference=reference).state == "lost"


def test_losing_needs_a_reason(api, ana):
    reference = api.post("opportunities", {"contact": reference_of(ana), "title": "X"}).json()[
        "reference"
    ]

    response = api.post(f"opportunities/{reference}/lose", {})

    assert response.status_code == 422
    assert response.json()["problems"][0]["field"] == "reason"


def test_a_sent_quote_past_its_validity_reads_and_filters_as_expired(api, ana, catalog):
    reference = quote(api, ana, ("CAF-001", 1)).json()["reference"]
    Quote.objects.filter(reference=reference).update(valid_until=timezone.now())

    shown = api.get(f"quotes/{reference}").json()
    expired = api.get("quotes", state="expired").json()["results"]
    sent = api.get("quotes", state="sent").json()["results"]
    accepted = api.post(f"quotes/{reference}/accept")

    assert (shown["state"], shown["state_label"]) == ("expired", "vencida")
    assert [q["reference"] for q in expired] == [reference]
    assert sent == []
    assert accepted.status_code == 422
    assert accepted.json()["state"] == "expired"


# Orders: delivered or cancelled through the sales services -------------------------------------


def accepted_order(api, ana, *items) -> str:
    reference = quote(api, ana, *items).json()["reference"]
    assert api.post(f"quotes/{reference}/accept").status_code == 200
    return reference


def on_hand_and_reserved(sku: str) -> tuple[int, int]:
    product = Product.objects.get(sku=sku)
    return product.quantity_on_hand, product.quantity_reserved


def test_delivering_an_order_consumes_its_reservation_and_a_second_delivery_answers_the_same(
    api, ana, catalog
):
    reference = accepted_order(api, ana, ("TAZ-002", 2), ("MOL-003", 1))

    first = api.post(f"quotes/{reference}/deliver")
    again = api.post(f"quotes/{reference}/deliver")  # another key: the service's own no-op

    assert first.status_code == 200, first.content
    assert (first.json()["state"], first.json()["state_label"]) == ("delivered", "entregada")
    assert first.json()["delivered_at"] is not None
    assert (again.status_code, again.json()) == (200, first.json())
    assert on_hand_and_reserved("TAZ-002") == (1, 0)
    assert api.get(f"quotes/{reference}").json()["state"] == "delivered"


def test_a_delivery_replayed_with_its_key_answers_the_same(api, ana, catalog):
    reference = accepted_order(api, ana, ("TAZ-002", 2))

    key = new_key()
    first = api.post(f"quotes/{reference}/deliver", key=key)
    replay = api.post(f"quotes/{reference}/deliver", key=key)

    assert (replay.status_code, replay.json()) == (200, first.json())
    assert replay.headers["X-Idempotency-Replayed"] == "true"
    assert on_hand_and_reserved("TAZ-002") == (1, 0)


def test_delivering_more_than_reserved_is_refused_and_nothing_is_lost(api, ana, catalog):
    reference = accepted_order(api, ana, ("TAZ-002", 2))

    response = api.post(
        f"quotes/{reference}/deliver", {"items": [{"sku": "TAZ-002", "quantity": 3}]}
    )

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["code"], body["sku"], body["reserved"]) == (
        "VALIDATION",
        "delivery_exceeds_reserved",
        "TAZ-002",
        2,
    )
    assert "TAZ-002" in body["user_message"]
    assert Quote.objects.get(reference=reference).state == "accepted"
    assert on_hand_and_reserved("TAZ-002") == (3, 2)
    # The order as it is still delivers.
    delivered = api.post(
        f"quotes/{reference}/deliver", {"items": [{"sku": "TAZ-002", "quantity": 2}]}
    )
    assert delivered.json()["state"] == "delivered"


@pytest.mark.parametrize(
    "body",
    [
        {"items": []},
        {"items": [{"sku": "TAZ-002", "quantity": 0}]},
        {"items": [{"sku": "TAZ-002"}]},
        {"items": "TAZ-002"},
        {"quantity": 2},
    ],
)
def test_a_malformed_delivery_is_refused_as_bad_input(api, ana, catalog, body):
    reference = accepted_order(api, ana, ("TAZ-002", 2))

    response = api.post(f"quotes/{reference}/deliver", body)

    assert response.status_code == 422, response.content
    assert response.json()["error_type"] == "VALIDATION"
    assert on_hand_and_reserved("TAZ-002") == (3, 2)


def test_cancelling_an_order_releases_its_stock_and_it_cannot_be_delivered(api, ana, catalog):
    reference = accepted_order(api, ana, ("TAZ-002", 3))

    cancelled = api.post(f"quotes/{reference}/cancel")
    delivered = api.post(f"quotes/{reference}/deliver")

    assert cancelled.status_code == 200, cancelled.content
    assert (cancelled.json()["state"], cancelled.json()["state_label"]) == (
        "cancelled",
        "cancelada",
    )
    assert on_hand_and_reserved("TAZ-002") == (3, 0)
    assert delivered.status_code == 422
    assert (delivered.json()["code"], delivered.json()["state"]) == ("invalid_state", "cancelled")


def test_only_an_accepted_quote_is_delivered(api, ana, catalog):
    reference = quote(api, ana, ("TAZ-002", 1)).json()["reference"]

    response = api.post(f"quotes/{reference}/deliver")

    assert response.status_code == 422
    assert (response.json()["code"], response.json()["state"]) == ("invalid_state", "sent")


def test_accepting_a_quote_settles_the_opportunitys_other_quotes(api, ana, catalog):
    opportunity = api.post("opportunities", {"contact": reference_of(ana), "title": "Tazas"})
    opportunity = opportunity.json()["reference"]
    chosen, other = (
        quote(api, ana, ("TAZ-002", 2), opportunity=opportunity).json()["reference"]
        for _ in range(2)
    )

    api.post(f"quotes/{chosen}/accept")
    refused = api.post(f"quotes/{other}/accept")

    assert api.get(f"quotes/{other}").json()["state"] == "superseded"
    assert refused.status_code == 422
    assert (refused.json()["code"], refused.json()["state"]) == ("invalid_state", "superseded")
    assert api.get(f"opportunities/{opportunity}").json()["state"] == "won"
    assert on_hand_and_reserved("TAZ-002") == (3, 2)
    superseded = api.get("quotes", state="superseded").json()["results"]
    assert [q["reference"] for q in superseded] == [other]


def test_quote_lines_name_their_amounts_as_the_tool_api_does(api, ana, catalog):
    body = quote(api, ana, ("CAF-001", 2), ("TAZ-002", 1)).json()

    assert set(body["lines"][1]) == set(QuoteLineOut.model_fields)
    assert body["lines"][1] == {
        "sku": "TAZ-002",
        "name": "Taza de cerámica",
        "quantity": 1,
        "unit_price_excl_tax": "4.99",
        "tax_rate": "21.00",
        "subtotal_excl_tax": "4.99",
        "tax": "1.05",
        "total_incl_tax": "6.04",
    }
