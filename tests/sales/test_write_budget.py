"""The SQL of a first create_quote, accept_quote, reject_quote and request_sales_contact
(issue #11), and the guarantees the lean write path keeps.

Each test bounds the statements of the call's own work, from the idempotency key lookup to the
COMMIT of its transaction, as the Gateway's calls run them (`call_tool` with a fresh key), so a
row read twice or a statement per quote line that creeps back fails the ceiling here. The
call's trace (tooling_toolcall) and authentication (core_gatewaycredential) are other code's
budget and are left out.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone
from django_fsm_log.models import StateLog

from core import references
from core.errors import ValidationFailed
from core.identity import identify_contact
from core.models import Company, Contact, Conversation
from sales.models import Opportunity, Product, Quote, QuoteLine
from sales.services.catalog import price_list_item_set, product_create
from sales.services.quote_lifecycle import quote_accept, quote_create, quote_reject
from sales.services.quote_pricing import QuoteItem
from tests.factories import ANA_DOCUMENT, Catalog
from tests.statements import Budget, call_statements, shape

CONVERSATION = "conv-sales-budget"

# Budgets count the statements besides BEGIN and COMMIT. No savepoint: every refusal comes
# before the first write (core.transactions.joined).
# create_quote: the engine's key lookup and claim, the call's conversation, the company's
# step-up policy (kept in the process cache afterwards), the current price list, ONE read of
# the products with their prices, the INSERT (a reference collision writes nothing and is
# drawn again), ONE insert for every line, and the send transition (its log and UPDATE) on
# the row this transaction inserted, so nothing is locked or read again.
CREATE = Budget(
    at_most=13,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        # The customer's quote of these lines, one call at a time, and looked for: a model
        # that re-planned with a new key is answered with it (core.idempotency.intent).
        "LOCK intent",
        "SELECT sales_quote",
        "INSERT sales_quote",
        "INSERT sales_quoteline",  # all the lines at once
        "INSERT django_fsm_log_statelog",  # draft -> sent
        "UPDATE sales_quote",
        # The new quote, seen by the conversation: the ledger written with the stored answer,
        # in one statement (core.sql.execute_all).
        "INSERT tooling_exposedreference + UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)
# accept_quote (after create_quote, whose step-up policy read is cached): the quote's
# opportunity locked first (the lock order that lets winning settle its other quotes; it finds
# none here), the quote as this conversation saw it, read once under its row lock, the
# verification's freshness (the policy lists accept_quote), then ONE statement locking the
# quote's products in primary-key order (with what the quote needs of each), ONE reserving
# them and ONE recording every reservation (what delivery consumes, cancellation releases).
ACCEPT = Budget(
    at_most=13,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        "SELECT sales_opportunity FOR UPDATE",
        "SELECT sales_quote FOR UPDATE",
        "SELECT sales_product FOR UPDATE",
        "UPDATE sales_product",
        "INSERT sales_stockreservation",  # all the reservations at once
        "INSERT django_fsm_log_statelog",  # sent -> accepted
        "UPDATE sales_quote",
        "UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)
REJECT = Budget(
    at_most=8,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        "SELECT sales_quote FOR UPDATE",
        "INSERT django_fsm_log_statelog",  # sent -> rejected
        "UPDATE sales_quote",
        "UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)
REQUEST_CONTACT = Budget(
    at_most=8,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        "LOCK intent",  # the customer's request on this topic, as for CREATE
        "SELECT sales_opportunity",
        "INSERT sales_opportunity",
        # The ledger written with the stored answer, in one statement (core.sql.execute_all).
        "INSERT tooling_exposedreference + UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)


def call(company: Company, tool: str, arguments: dict):
    """A write tool called with a fresh key: its outcome and the shapes of its own statements,
    up to its COMMIT."""
    outcome, statements = call_statements(company, tool, arguments, conversation_id=CONVERSATION)
    return outcome, [shape(sql) for sql in statements]


@pytest.fixture
def gateway(company: Company, ana: Contact, catalog: Catalog) -> Company:
    """The company as authentication hands it to a call, with Ana identified in the
    conversation and verified (accept_quote asks for step-up under the default policy)."""
    conversation = Conversation.objects.create(company=company, external_id=CONVERSATION)
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    now = timezone.now()
    Conversation.objects.filter(pk=conversation.pk).update(
        verified_at=now, verified_until=now + timedelta(minutes=15)
    )
    for model in (Quote, Opportunity):  # the transition log's, cached per process
        ContentType.objects.get_for_model(model)
    return Company.objects.get(pk=company.pk)


@pytest.fixture
def shelf(company: Company, catalog: Catalog) -> list[Product]:
    """Eight more priced products, stock tracked or not, for quotes of many lines."""
    products = []
    for n in range(8):
        product = product_create(
            company=company,
            sku=f"EXT-{n:03d}",
            name=f"Extra {n}",
            track_stock=n % 2 == 0,
            quantity_on_hand=50,
        )
        price_list_item_set(price_list=catalog.price_list, product=product, unit_price="2.00")
        products.append(product)
    return products


def create(company: Company, items: list[dict]):
    return call(company, "create_quote", {"identifier": ANA_DOCUMENT, "items": items})


BASKET = [{"sku": "CAF-001", "quantity": 3}, {"sku": "TAZ-002", "quantity": 2}]  # 53.33 EUR


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_create_quote_stays_within_its_statement_budget(gateway):
    outcome, statements = create(gateway, BASKET)

    assert outcome.is_error is False, outcome.body
    CREATE.check(statements)
    quote = Quote.objects.get(reference=outcome.body["reference"])
    assert (quote.state, quote.total, outcome.body["total"]) == ("sent", Decimal("53.33"), "53.33")
    shown = [
        (line["sku"], line["quantity"], line["subtotal_excl_tax"]) for line in outcome.body["lines"]
    ]
    stored = [(line.sku, line.quantity, line.subtotal) for line in quote.lines.all()]
    assert shown == [("CAF-001", 3, "37.50"), ("TAZ-002", 2, "9.98")]
    assert stored == [("CAF-001", 3, Decimal("37.50")), ("TAZ-002", 2, Decimal("9.98"))]
    assert StateLog.objects.get(object_id=quote.pk).transition == "send"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_create_quote_costs_the_same_whatever_its_number_of_lines(gateway, shelf):
    items = [*BASKET, *({"sku": p.sku, "quantity": 1} for p in shelf)]

    outcome, statements = create(gateway, items)

    assert outcome.is_error is False, outcome.body
    CREATE.check(statements)
    assert QuoteLine.objects.filter(quote__reference=outcome.body["reference"]).count() == 10


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_accept_quote_stays_within_its_statement_budget(gateway, catalog):
    created, _ = create(gateway, BASKET)

    outcome, statements = call(
        gateway, "accept_quote", {"identifier": ANA_DOCUMENT, "quote": created.body["reference"]}
    )

    assert outcome.is_error is False, outcome.body
    ACCEPT.check(statements)
    assert outcome.body["state"] == "accepted"
    reserved = dict(Product.objects.values_list("sku", "quantity_reserved"))
    assert (reserved["CAF-001"], reserved["TAZ-002"]) == (3, 2)
    assert StateLog.objects.filter(transition="accept").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_accept_quote_costs_the_same_whatever_its_number_of_lines(gateway, shelf):
    created, _ = create(gateway, [*BASKET, *({"sku": p.sku, "quantity": 4} for p in shelf)])

    outcome, statements = call(
        gateway, "accept_quote", {"identifier": ANA_DOCUMENT, "quote": created.body["reference"]}
    )

    assert outcome.is_error is False, outcome.body
    ACCEPT.check(statements)
    reserved = dict(
        Product.objects.filter(sku__startswith="EXT-").values_list("sku", "quantity_reserved")
    )
    assert reserved == {p.sku: 4 if p.track_stock else 0 for p in shelf}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_reject_quote_stays_within_its_statement_budget(gateway):
    created, _ = create(gateway, BASKET)

    outcome, statements = call(
        gateway, "reject_quote", {"identifier": ANA_DOCUMENT, "quote": created.body["reference"]}
    )

    assert outcome.is_error is False, outcome.body
    REJECT.check(statements)
    assert Quote.objects.get(reference=created.body["reference"]).state == "rejected"
    assert StateLog.objects.filter(transition="reject").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_request_sales_contact_stays_within_its_statement_budget(gateway):
    outcome, statements = call(
        gateway,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": "Cafetera industrial"},
    )

    assert outcome.is_error is False, outcome.body
    REQUEST_CONTACT.check(statements)
    assert Opportunity.objects.get(reference=outcome.body["reference"]).state == "new"


# The guarantees the lean path keeps --------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_reference_collision_draws_another_reference_within_the_call(gateway, monkeypatch):
    taken, _ = create(gateway, BASKET[:1])
    draws = iter([taken.body["reference"], "QT-NEW234"])
    monkeypatch.setattr(references, "new_reference", lambda prefix: next(draws))

    outcome, statements = create(gateway, BASKET[1:2])  # other lines: another quote

    assert outcome.is_error is False, outcome.body
    assert outcome.body["reference"] == "QT-NEW234"
    assert statements.count("INSERT sales_quote") == 2  # the taken one wrote nothing
    assert "SAVEPOINT" not in statements and statements[-1] == "COMMIT"
    assert Quote.objects.count() == 2


@pytest.mark.django_db
def test_a_short_product_reserves_nothing_and_leaves_the_callers_transaction_usable(
    company, ana, catalog
):
    quote = quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("CAF-001", 2), QuoteItem("TAZ-002", 3)],
    )
    Product.objects.filter(pk=catalog.mug.pk).update(quantity_reserved=1)  # another sale

    with transaction.atomic():  # a caller's transaction (the tool engine's, the admin's)
        with pytest.raises(ValidationFailed) as short:
            quote_accept(quote=quote)
        with pytest.raises(ValidationFailed) as twice:
            quote_create(
                company=company, contact=ana, items=[QuoteItem("CAF-001", 1)], expected_total="1"
            )
        quote_reject(quote=quote, reason="Sin existencias")  # the transaction still writes

    assert (short.value.code, twice.value.code) == ("insufficient_stock", "total_mismatch")
    assert short.value.as_dict()["sku"] == "TAZ-002"
    reserved = dict(Product.objects.values_list("sku", "quantity_reserved"))
    assert (reserved["CAF-001"], reserved["TAZ-002"]) == (0, 1)
    quote.refresh_from_db()
    assert quote.state == "rejected"
    assert Quote.objects.count() == 1


@pytest.mark.django_db
def test_a_refused_transition_leaves_the_callers_transaction_usable(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    quote_reject(quote=quote)

    with transaction.atomic():
        with pytest.raises(ValidationFailed) as accepted:
            quote_accept(quote=quote)
        with pytest.raises(ValidationFailed) as rejected:
            quote_reject(quote=quote)
        quote.refresh_from_db()  # the transaction still answers

    assert (accepted.value.code, rejected.value.code) == ("invalid_state", "invalid_state")
    assert quote.state == "rejected"
    assert Product.objects.get(pk=catalog.coffee.pk).quantity_reserved == 0
