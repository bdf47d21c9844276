"""The sales admin: scoped per company, and every button, quote and stock count via services."""

from decimal import Decimal

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core import mail
from django.db.models.signals import pre_save
from django.urls import reverse
from django.utils import translation
from django_fsm_log.models import StateLog

from core.models import StaffMembership
from core.services import contact_create
from sales import money
from sales.models import Opportunity, PriceList, Product, Quote
from sales.services.catalog import price_list_create
from sales.services.opportunities import opportunity_create, opportunity_win
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_create,
    quote_deliver,
    quote_expire,
)
from sales.services.quote_pricing import QuoteItem
from tests.admin_pages import (
    change_form_data,
    change_url,
    confirm,
    quote_form_data,
    quote_form_errors,
    transition_buttons,
)
from tests.factories import ANA_EMAIL

pytestmark = pytest.mark.django_db


@pytest.fixture
def seller(company):
    user = get_user_model().objects.create_user(username="vera", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sales"))
    StaffMembership.objects.create(user=user, company=company)
    return user


@pytest.fixture
def admin_client(client, seller):
    client.force_login(seller)
    return client


def press(client, obj, transition: str):
    return client.post(
        change_url(obj),
        change_form_data(client, obj, _fsm_transition_to=transition),
        follow=True,
    )


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# --- Opportunities -------------------------------------------------------------------------------


def test_the_pipeline_filters_by_stage_and_hides_other_companies(
    admin_client, company, other_company, ana
):
    new = opportunity_create(company=company, contact=ana, title="Oficina nueva")
    won = opportunity_win(
        opportunity=opportunity_create(company=company, contact=ana, title="Cafetería")
    )
    stranger = contact_create(company=other_company, first_name="Eva", email="e@example.com")
    theirs = opportunity_create(company=other_company, contact=stranger, title="Ajena")

    page = admin_client.get(reverse("admin:sales_opportunity_changelist"), {"state": "new"})

    content = page.content.decode()
    assert new.reference in content
    assert won.reference not in content
    assert theirs.reference not in content
    assert admin_client.get(change_url(theirs)).status_code == 302  # not found for this staff


def test_stage_buttons_move_an_opportunity_through_the_services(admin_client, seller, company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Oficina nueva")
    assert transition_buttons(admin_client.get(change_url(opportunity))) == {
        "qualify",
        "win",
        "lose",
    }

    press(admin_client, opportunity, "qualify")

    opportunity.refresh_from_db()
    assert opportunity.state == Opportunity.State.QUALIFIED
    log = StateLog.objects.for_(opportunity).get()
    assert (log.transition, log.by) == ("qualify", seller)


def test_losing_asks_for_the_reason(admin_client, company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Oficina nueva")
    url = reverse("admin:sales_opportunity_transition", args=[opportunity.pk, "lose"])
    confirmed_against = {f"confirmed_against_{opportunity.pk}": "state=new"}

    refused = admin_client.post(url, {"reason": "other", "details": "", **confirmed_against})
    admin_client.post(
        url, {"reason": "other", "details": "Eligió a la competencia", **confirmed_against}
    )

    assert refused.status_code == 200  # the confirmation page again, with its error
    opportunity.refresh_from_db()
    assert (opportunity.state, opportunity.lost_reason) == ("lost", "Eligió a la competencia")


def test_a_closed_opportunity_offers_no_buttons_and_refuses_a_stale_one(admin_client, company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Oficina nueva")
    data = change_form_data(admin_client, opportunity, _fsm_transition_to="qualify")
    opportunity_win(opportunity=opportunity)  # meanwhile, from another screen

    response = admin_client.post(change_url(opportunity), data, follow=True)

    opportunity.refresh_from_db()
    assert opportunity.state == Opportunity.State.WON
    assert messages_of(response) == ["Esa oportunidad ya está cerrada como ganada."]
    assert transition_buttons(admin_client.get(change_url(opportunity))) == set()


def test_staff_create_opportunities_with_a_reference(admin_client, company, ana, seller):
    response = admin_client.post(
        reverse("admin:sales_opportunity_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "title": "Máquina de café",
            "notes": "",
            "amount": "1200.00",
            "currency": "",
            "owner": seller.pk,
        },
    )

    assert response.status_code == 302
    opportunity = Opportunity.objects.get()
    assert opportunity.reference.startswith("OP-")
    assert (opportunity.amount, opportunity.currency, opportunity.owner) == (
        Decimal("1200.00"),
        company.currency,
        seller,
    )


# --- Quotes --------------------------------------------------------------------------------------


def test_staff_create_a_draft_priced_by_the_system_and_send_it(
    admin_client, company, ana, catalog, django_capture_on_commit_callbacks
):
    response = admin_client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(company, ana, [("CAF-001", 3)]),
    )

    assert response.status_code == 302
    quote = Quote.objects.get()
    assert (quote.state, quote.total) == (Quote.State.DRAFT, Decimal("41.25"))
    # A draft never reached the customer: nothing to withdraw, so no "Vencer" on it.
    assert transition_buttons(admin_client.get(change_url(quote))) == {"send"}

    press(admin_client, quote, "send")  # it emails the customer: a confirmation page first
    quote.refresh_from_db()
    assert quote.state == Quote.State.DRAFT and mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        confirm(admin_client, quote, "send", "")

    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT
    assert [m.to for m in mail.outbox] == [[ANA_EMAIL]]
    assert transition_buttons(admin_client.get(change_url(quote))) == {
        "accept",
        "reject",
        "expire",
    }


def test_a_drafts_expiry_typed_as_a_url_is_refused_and_changes_nothing(
    admin_client, company, ana, catalog
):
    admin_client.post(
        reverse("admin:sales_quote_add"), quote_form_data(company, ana, [("CAF-001", 1)])
    )
    quote = Quote.objects.get(state=Quote.State.DRAFT)
    url = reverse("admin:sales_quote_transition", args=[quote.pk, "expire"])

    response = admin_client.post(
        url, {"reason": "no_answer", "details": "", "token": "x"}, follow=True
    )

    quote.refresh_from_db()
    assert quote.state == Quote.State.DRAFT
    assert "ahora no se le puede aplicar «Vencer»" in " ".join(
        str(m) for m in response.context["messages"]
    )


def test_the_quote_form_shows_every_problem_at_once_in_staffs_words(
    admin_client, company, ana, catalog
):
    response = admin_client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(company, ana, [("TAZ-002", 9), ("FIL-005", 1), ("CAF-001", 2)]),
    )

    assert response.status_code == 200
    assert quote_form_errors(response) == [
        "Solo quedan 3 de «Taza de cerámica» (se piden 9).",
        "«Filtros» no está en la lista de precios vigente.",
    ]
    assert not Quote.objects.exists()


def test_a_stale_expire_button_cannot_undo_an_acceptance(admin_client, company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])
    data = change_form_data(admin_client, quote, _fsm_transition_to="expire")
    quote_accept(quote=quote)  # the customer accepts while the page is open

    response = admin_client.post(change_url(quote), data, follow=True)

    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    assert Product.objects.get(sku="TAZ-002").quantity_reserved == 2
    # Expiring asks for a confirmation first: the button leads to its page, which refuses.
    assert messages_of(response) == [
        f"{quote.reference} está Aceptada: ahora no se le puede aplicar «Vencer»."
    ]


def test_staff_accept_a_quote_with_the_same_stock_rules(admin_client, company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])

    press(admin_client, quote, "accept")

    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    assert Product.objects.get(sku="TAZ-002").quantity_reserved == 2


def test_a_quantity_written_with_a_superscript_digit_is_a_form_error(
    admin_client, company, ana, catalog
):
    # str.isdigit() takes "²" (and "③"), int() does not.
    response = admin_client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(company, ana, [("CAF-001", "²")]),
    )

    assert response.status_code == 200
    assert quote_form_errors(response) == ["Introduzca un número entero."]
    assert not Quote.objects.exists()


@pytest.mark.parametrize(
    "settle",
    [lambda quote: quote, lambda quote: quote_accept(quote=quote)],
    ids=["sent", "accepted"],
)
def test_a_quote_once_sent_cannot_be_deleted_in_the_admin(
    admin_client, company, ana, catalog, settle
):
    quote = settle(quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)]))

    page = admin_client.get(change_url(quote))
    one = admin_client.post(reverse("admin:sales_quote_delete", args=[quote.pk]), {"post": "yes"})
    bulk = admin_client.post(
        reverse("admin:sales_quote_changelist"),
        {"action": "delete_selected", "_selected_action": [quote.pk], "post": "yes"},
    )

    assert reverse("admin:sales_quote_delete", args=[quote.pk]) not in page.content.decode()
    assert one.status_code == 403
    assert bulk.status_code == 403
    assert Quote.objects.filter(pk=quote.pk).exists()
    assert Product.objects.get(sku="TAZ-002").quantity_reserved == (
        2 if quote.state == Quote.State.ACCEPTED else 0
    )


def test_a_draft_never_sent_may_be_deleted_alone_or_in_bulk(admin_client, company, ana, catalog):
    drafts = [
        quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)], send=False)
        for _ in range(3)
    ]
    quote_expire(quote=drafts[2])  # withdrawn, still never sent

    one = admin_client.post(
        reverse("admin:sales_quote_delete", args=[drafts[0].pk]), {"post": "yes"}
    )
    bulk = admin_client.post(
        reverse("admin:sales_quote_changelist"),
        {
            "action": "delete_selected",
            "_selected_action": [d.pk for d in drafts[1:]],
            "post": "yes",
        },
    )

    assert (one.status_code, bulk.status_code) == (302, 302)
    assert not Quote.objects.exists()


# --- Catalog -------------------------------------------------------------------------------------


def test_counted_stock_cannot_go_below_reservations_in_the_admin(
    admin_client, company, ana, catalog
):
    quote_accept(quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)]))
    mug = Product.objects.get(sku="TAZ-002")

    refused = admin_client.post(
        change_url(mug), change_form_data(admin_client, mug, quantity_on_hand=1)
    )
    admin_client.post(change_url(mug), change_form_data(admin_client, mug, quantity_on_hand=7))

    assert refused.status_code == 200
    mug.refresh_from_db()
    assert (mug.quantity_on_hand, mug.quantity_reserved) == (7, 2)


def test_a_new_default_price_list_takes_over_from_the_old_one(admin_client, company, catalog):
    response = admin_client.post(
        reverse("admin:sales_pricelist_add"),
        {
            "company": company.pk,
            "name": "Tarifa 2027",
            "currency": "eur",
            "valid_from": "",
            "valid_until": "",
            "is_default": "on",
            "items-TOTAL_FORMS": "1",
            "items-INITIAL_FORMS": "0",
            "items-MIN_NUM_FORMS": "0",
            "items-MAX_NUM_FORMS": "1000",
            "items-0-product": catalog.coffee.pk,
            "items-0-unit_price": "13.00",
        },
    )

    assert response.status_code == 302
    current = PriceList.objects.get(is_default=True)
    assert (current.name, current.currency) == ("Tarifa 2027", "EUR")
    assert current.items.get().unit_price == Decimal("13.00")


def test_a_price_with_more_decimals_than_the_currency_is_refused(admin_client, company, catalog):
    yen = price_list_create(company=company, name="Yen", currency="JPY")
    data = change_form_data(admin_client, yen)
    index = int(data["items-TOTAL_FORMS"]) - 1  # the empty extra row
    data[f"items-{index}-product"] = catalog.coffee.pk
    data[f"items-{index}-unit_price"] = "12.50"

    response = admin_client.post(change_url(yen), data)

    assert response.status_code == 200
    assert not yen.items.exists()


def _new_price_list_form(company, currency: str, product: Product, price: str) -> dict:
    return {
        "company": company.pk,
        "name": f"Lista {currency}",
        "currency": currency,
        "valid_from": "",
        "valid_until": "",
        "items-TOTAL_FORMS": "1",
        "items-INITIAL_FORMS": "0",
        "items-MIN_NUM_FORMS": "0",
        "items-MAX_NUM_FORMS": "1000",
        "items-0-product": product.pk,
        "items-0-unit_price": price,
    }


def test_a_new_price_list_refuses_prices_with_more_decimals_than_its_currency(
    admin_client, company, catalog
):
    response = admin_client.post(
        reverse("admin:sales_pricelist_add"),
        _new_price_list_form(company, "JPY", catalog.coffee, "12.50"),
    )

    assert response.status_code == 200
    (prices,) = response.context["inline_admin_formsets"]
    assert [set(errors) for errors in prices.formset.errors] == [{"unit_price"}]
    assert not PriceList.objects.filter(currency="JPY").exists()


def test_a_new_price_list_with_exact_prices_is_saved(admin_client, company, catalog):
    response = admin_client.post(
        reverse("admin:sales_pricelist_add"),
        _new_price_list_form(company, "jpy", catalog.coffee, "1250"),
    )

    assert response.status_code == 302
    yen = PriceList.objects.get(currency="JPY")
    assert yen.items.get().unit_price == Decimal("1250")


def test_a_price_list_pricing_a_retired_product_can_still_be_edited(admin_client, company, catalog):
    # The catalog prices the retired (inactive) descaler: staff rename the list only.
    data = change_form_data(admin_client, catalog.price_list, name="Tarifa 2026")

    response = admin_client.post(change_url(catalog.price_list), data)

    assert response.status_code == 302
    catalog.price_list.refresh_from_db()
    assert catalog.price_list.name == "Tarifa 2026"
    assert catalog.price_list.items.count() == 4


def test_a_retired_product_is_not_offered_for_a_new_price(admin_client, company, catalog):
    yen = price_list_create(company=company, name="Yen", currency="JPY")

    page = admin_client.get(change_url(yen))

    choices = page.context["inline_admin_formsets"][0].formset.empty_form.fields["product"]
    offered = set(choices.queryset.values_list("sku", flat=True))
    assert "DES-004" not in offered
    assert "CAF-001" in offered
    # ...but a list that already prices it offers it, once, for its own row.
    page = admin_client.get(change_url(catalog.price_list))
    choices = page.context["inline_admin_formsets"][0].formset.empty_form.fields["product"]
    skus = list(choices.queryset.values_list("sku", flat=True))
    assert "DES-004" in skus and len(skus) == len(set(skus))


@pytest.mark.parametrize("currency", ["zz", "eu", "ÉUR", "E1R", "€€€"])
def test_an_opportunitys_currency_must_be_an_iso_code(admin_client, company, ana, currency):
    response = admin_client.post(
        reverse("admin:sales_opportunity_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "title": "Oficina",
            "notes": "",
            "amount": "100",
            "currency": currency,
            "owner": "",
        },
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["currency"]
    assert not Opportunity.objects.exists()


@pytest.mark.parametrize("currency", ["usd", ""])
def test_an_opportunitys_currency_is_an_iso_code_or_the_companys(
    admin_client, company, ana, currency
):
    response = admin_client.post(
        reverse("admin:sales_opportunity_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "title": "Oficina",
            "notes": "",
            "amount": "100",
            "currency": currency,
            "owner": "",
        },
    )

    assert response.status_code == 302
    assert Opportunity.objects.get().currency == (currency.upper() or company.currency)


@pytest.mark.parametrize(
    ("quantity", "message"),
    [
        (-2, "Asegúrese de que este valor es mayor o igual a 1."),
        (0, "Asegúrese de que este valor es mayor o igual a 1."),
        (10_001, "Asegúrese de que este valor es menor o igual a 10000."),
    ],
)
def test_a_quote_line_without_a_positive_quantity_is_a_form_error(
    admin_client, company, ana, catalog, quantity, message
):
    response = admin_client.post(
        reverse("admin:sales_quote_add"), quote_form_data(company, ana, [("TAZ-002", quantity)])
    )

    assert response.status_code == 200
    assert quote_form_errors(response) == [message]
    assert not Quote.objects.exists()


def test_a_quote_line_of_a_discontinued_product_is_a_form_error(
    admin_client, company, ana, catalog
):
    response = admin_client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(company, ana, [("DES-004", 1)]),
    )

    assert response.status_code == 200
    # Not offered at all: the rows choose among the active products only.
    assert quote_form_errors(response) == [
        "Escoja una opción válida. Esa opción no está entre las disponibles."
    ]
    assert not Quote.objects.exists()


# --- Orders: delivered or cancelled; tracking; a closed opportunity's amount ---------------------


def test_staff_deliver_an_accepted_order_with_its_button(
    admin_client, seller, company, ana, catalog
):
    quote = quote_accept(
        quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])
    )
    assert transition_buttons(admin_client.get(change_url(quote))) == {"deliver", "cancel"}

    response = press(admin_client, quote, "deliver")

    quote.refresh_from_db()
    assert quote.state == Quote.State.DELIVERED
    mug = Product.objects.get(sku="TAZ-002")
    assert (mug.quantity_on_hand, mug.quantity_reserved) == (1, 0)
    assert StateLog.objects.get(object_id=quote.pk, transition="deliver").by == seller
    assert messages_of(response) == [f"{quote.reference} está ahora entregada."]
    assert transition_buttons(admin_client.get(change_url(quote))) == set()


def test_staff_cancel_an_accepted_order_and_a_stale_delivery_is_refused(
    admin_client, company, ana, catalog
):
    quote = quote_accept(
        quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])
    )
    stale = change_form_data(admin_client, quote, _fsm_transition_to="deliver")

    confirm(admin_client, quote, "cancel", "customer_asked")
    response = admin_client.post(change_url(quote), stale, follow=True)

    quote.refresh_from_db()
    assert quote.state == Quote.State.CANCELLED
    mug = Product.objects.get(sku="TAZ-002")
    assert (mug.quantity_on_hand, mug.quantity_reserved) == (3, 0)
    assert messages_of(response) == ["Ese pedido fue cancelado."]


def test_stock_tracking_is_not_turned_off_in_the_admin_under_live_reservations(
    admin_client, company, ana, catalog
):
    quote = quote_accept(
        quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])
    )
    mug = Product.objects.get(sku="TAZ-002")

    refused = admin_client.post(
        change_url(mug), change_form_data(admin_client, mug, track_stock="")
    )

    assert refused.status_code == 200  # the form again, with the error
    assert "entréguelos o cancélelos" in refused.content.decode()
    assert Product.objects.get(pk=mug.pk).track_stock is True
    quote_deliver(quote=quote)
    admin_client.post(change_url(mug), change_form_data(admin_client, mug, track_stock=""))
    assert Product.objects.get(pk=mug.pk).track_stock is False


def test_a_closed_opportunitys_amount_is_read_only_in_the_admin(
    admin_client, company, ana, catalog
):
    opportunity = opportunity_create(company=company, contact=ana, title="Oficina nueva")
    stale = change_form_data(admin_client, opportunity, amount="1.00")
    quote_accept(
        quote=quote_create(
            company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)], opportunity=opportunity
        )
    )

    page = admin_client.get(change_url(opportunity))
    admin_client.post(change_url(opportunity), stale, follow=True)

    assert "amount" not in page.context["adminform"].form.fields
    assert "title" in page.context["adminform"].form.fields
    opportunity.refresh_from_db()
    assert (opportunity.state, opportunity.amount) == (Opportunity.State.WON, Decimal("12.08"))


def test_a_reservation_made_while_the_stock_form_saves_undoes_the_whole_save(
    admin_client, company, ana, catalog
):
    """The form's check passes; a quote accepted at that instant (here: as the form's other
    changes are written) reserves more than the count, so the service refuses under its lock.
    Nothing of the form stays, and the page says why, never "changed successfully"."""
    mug = Product.objects.get(sku="TAZ-002")
    data = change_form_data(admin_client, mug, name="Taza grande", quantity_on_hand=1)

    def colleague_accepts_a_quote(sender, instance, **kwargs):
        if instance.pk == mug.pk:
            Product.objects.filter(pk=mug.pk).update(quantity_reserved=2)

    pre_save.connect(colleague_accepts_a_quote, sender=Product)
    try:
        response = admin_client.post(change_url(mug), data, follow=True)
    finally:
        pre_save.disconnect(colleague_accepts_a_quote, sender=Product)

    shown = [str(m) for m in response.context["messages"]]
    assert response.redirect_chain == [(change_url(mug), 302)]
    assert shown == ["Las existencias no pueden quedar por debajo de lo ya reservado (2)."]
    mug.refresh_from_db()
    assert mug.name != "Taza grande"
    assert not LogEntry.objects.filter(object_id=str(mug.pk)).exists()


def test_an_opportunitys_amount_is_shown_by_the_money_formatter_on_every_admin_page(
    admin_client, company, ana
):
    """Never the model's three stored decimals ("1077,230"): the list, the open
    opportunity's form and the closed one's read-only amount all go through core.l10n."""
    opportunity = opportunity_create(
        company=company, contact=ana, title="Reforma", amount=Decimal("1077.23")
    )
    pages = [
        admin_client.get(reverse("admin:sales_opportunity_changelist")),
        admin_client.get(change_url(opportunity)),
    ]
    opportunity_win(opportunity=opportunity)
    pages.append(admin_client.get(change_url(opportunity)))

    for page in pages:
        html = page.content.decode()
        assert "1077,230" not in html and "1077.230" not in html and "1.077,230" not in html
    with translation.override("es"):
        shown = money.shown(Decimal("1077.23"), "EUR")  # "1.077,23 €"
    assert shown in pages[0].content.decode()  # the list
    assert 'value="1077.23"' in pages[1].content.decode()  # the open one's field
    closed = pages[2].content.decode()
    assert shown in closed
    assert 'name="amount"' not in closed  # read-only once closed
