"""Quote pages (sales.quote_links, sales.quote_pages, sales.quote_views): the link in a sent
quote's email, the page with its lines, totals and validity, and accepting (with the step-up
code the accept_quote tool asks for, sent to the customer's own channel, and the stock
reserved as the tool reserves it) or rejecting it, once per form. Each refusal is a clear page
that changes nothing. Browser: test_browser_quote_pages.py."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.core.cache import caches
from django.utils import formats, timezone, translation

from core.models import Conversation, StepUpPolicy, VerificationChallenge
from sales.models import Product, Quote, StockReservation
from sales.services import QuoteItem, quote_create, quote_reject
from tests import factories
from tests.customer_links import PUBLIC_URL, form_token, quote_path, visible_text

# Codes are committed on a connection of their own (core.durable), and the quote's email is
# sent after its commit: real transactions.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def links_on(settings):
    settings.GARANTE_PUBLIC_URL = PUBLIC_URL
    caches["shared"].clear()
    yield
    caches["shared"].clear()


@pytest.fixture
def sent_quote(company, ana, catalog, sms_outbox):
    """Ana's quote of two coffees and a mug, sent and emailed: (quote, its page's path)."""
    mail.outbox.clear()
    quote = quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("CAF-001", 2), QuoteItem("TAZ-002", 1)],
    )
    (email,) = mail.outbox
    return quote, quote_path(email.body)


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def reserved(product: Product) -> int:
    product.refresh_from_db()
    return product.quantity_reserved


def test_the_email_links_to_the_page_which_shows_lines_totals_and_validity(
    client, sent_quote, catalog
):
    quote, path = sent_quote
    (email,) = mail.outbox
    assert f"Para verla y aceptarla o rechazarla: {PUBLIC_URL}/q/" in email.body
    token = path.rsplit("/", 1)[1]
    assert len(token) == 40 and quote.reference not in token

    page = client.get(path)

    assert page.status_code == 200
    text = visible_text(page.content.decode())
    assert f"Cotización {quote.reference}" in text
    assert "Café en grano 1 kg 2 × 12,50 € · CAF-001 25,00 €" in text  # noqa: RUF001
    assert "Subtotal 29,99 €" in text
    assert "Total " in text and "Válida hasta" in text
    assert "Estado enviada" in text
    assert "Aceptar la cotización" in text and "Rechazarla" in text
    # Opening it (GET, or a scanner's HEAD) changes nothing, and sends no code.
    assert client.head(path).status_code == 200
    assert client.get(path + "/reject").status_code == 200
    assert client.get(path + "/accept").status_code == 405
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT
    assert reserved(catalog.coffee) == 0
    assert not VerificationChallenge.objects.exists()
    assert not Conversation.objects.filter(external_id__startswith="link:").exists()


def test_accepting_asks_for_a_code_sent_to_the_customers_own_phone_then_reserves_stock(
    client, sent_quote, catalog, sms_outbox, ana
):
    quote, path = sent_quote
    html = client.get(path).content.decode()

    asked = client.post(path + "/accept", {"form_token": form_token(html)})

    assert asked.status_code == 200
    text = visible_text(asked.content.decode())
    assert "Le hemos enviado un código de 6 cifras (teléfono terminado en 22)" in text
    (sms,) = sms_outbox
    assert sms.to == factories.ANA_PHONE
    challenge = VerificationChallenge.objects.get()
    assert challenge.contact == ana and challenge.conversation.external_id.startswith("link:")
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT and reserved(catalog.coffee) == 0

    # A wrong code: refused, one attempt gone, nothing changed.
    code = code_in(sms.body)
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    code_form = {"form_token": form_token(asked.content.decode()), "action": "accept"}
    refused = client.post(path + "/code", {**code_form, "code": wrong})
    assert refused.status_code == 422
    assert "El código no es correcto." in visible_text(refused.content.decode())
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT and reserved(catalog.coffee) == 0

    done = client.post(path + "/code", {**code_form, "code": code})

    assert done.status_code == 200
    text = visible_text(done.content.decode())
    assert "Ha aceptado la cotización." in text and "Estado aceptada" in text
    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    assert (reserved(catalog.coffee), reserved(catalog.mug)) == (2, 1)
    # The same form again (a double tap): the same answer, nothing twice.
    again = client.post(path + "/code", {**code_form, "code": code})
    assert again.status_code == 200
    assert "Ha aceptado la cotización." in visible_text(again.content.decode())
    assert StockReservation.objects.filter(quote=quote).count() == 2
    assert (reserved(catalog.coffee), reserved(catalog.mug)) == (2, 1)


def test_without_a_step_up_policy_for_it_accepting_needs_no_code(
    client, sent_quote, company, catalog, sms_outbox
):
    StepUpPolicy.objects.create(company=company, actions=[])
    quote, path = sent_quote
    token = form_token(client.get(path).content.decode())

    done = client.post(path + "/accept", {"form_token": token})

    assert "Ha aceptado la cotización." in visible_text(done.content.decode())
    assert sms_outbox == []
    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED and reserved(catalog.coffee) == 2


def test_an_expired_code_is_refused_and_another_can_be_sent(client, sent_quote, sms_outbox):
    quote, path = sent_quote
    asked = client.post(
        path + "/accept", {"form_token": form_token(client.get(path).content.decode())}
    )
    code_form = {"form_token": form_token(asked.content.decode()), "action": "accept"}
    VerificationChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    refused = client.post(path + "/code", {**code_form, "code": code_in(sms_outbox[0].body)})

    assert refused.status_code == 422
    assert "Ese código caducó." in visible_text(refused.content.decode())
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT
    # Another code, by email this time.
    resent = client.post(path + "/code", {**code_form, "resend": "email"})
    resent_text = visible_text(resent.content.decode())
    assert "Le hemos enviado un código de 6 cifras (" in resent_text
    assert "@example.com)" in resent_text
    assert VerificationChallenge.objects.filter(channel="email").count() == 1
    done = client.post(
        path + "/code",
        {
            **code_form,
            "form_token": form_token(resent.content.decode()),
            "code": code_in(mail.outbox[-1].body),
        },
    )
    assert "Ha aceptado la cotización." in visible_text(done.content.decode())


def test_rejecting_asks_then_rejects_with_the_reason(client, sent_quote, catalog):
    quote, path = sent_quote
    asked = client.get(path + "/reject")
    assert "Sí, rechazarla" in asked.content.decode()

    done = client.post(
        path + "/reject", {"form_token": form_token(asked.content.decode()), "reason": "Caro"}
    )

    assert "Ha rechazado la cotización." in visible_text(done.content.decode())
    quote.refresh_from_db()
    assert (quote.state, quote.rejection_reason) == (Quote.State.REJECTED, "Caro")
    assert reserved(catalog.coffee) == 0


def test_a_decided_quote_shows_its_state_and_refuses_an_answer(client, sent_quote, catalog):
    quote, path = sent_quote
    token = form_token(client.get(path).content.decode())
    quote_reject(quote=quote)

    text = visible_text(client.get(path).content.decode())
    assert "Estado rechazada" in text
    assert "Esta cotización ya no admite respuesta: está rechazada." in text
    assert "Aceptar la cotización" not in text
    refused = client.post(path + "/accept", {"form_token": token})
    assert refused.status_code == 422
    assert "Esa cotización ya fue rechazada." in visible_text(refused.content.decode())
    assert reserved(catalog.coffee) == 0


def test_an_expired_quote_says_so_without_sending_a_code(client, sent_quote, sms_outbox):
    quote, path = sent_quote
    token = form_token(client.get(path).content.decode())
    Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() - timedelta(minutes=1))

    text = visible_text(client.get(path).content.decode())
    assert "Estado vencida" in text and "Aceptar la cotización" not in text
    refused = client.post(path + "/accept", {"form_token": token})
    assert refused.status_code == 422
    assert "Esa cotización está vencida." in visible_text(refused.content.decode())
    assert sms_outbox == []  # the quote's own checks come before the code
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT


def test_the_link_expires_a_month_after_the_quotes_validity(client, sent_quote):
    quote, path = sent_quote
    Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() - timedelta(days=31))
    page = client.get(path)
    assert page.status_code == 410
    assert "Enlace caducado" in visible_text(page.content.decode())


def test_a_forged_or_cross_page_link_shows_the_invalid_page(client, sent_quote):
    _quote, path = sent_quote
    token = path.rsplit("/", 1)[1]
    for forged in (token[:-1] + ("A" if token[-1] != "A" else "B"), token[:30], "x" * 40):
        page = client.get(f"/q/{forged}")
        assert page.status_code == 404
        assert "Enlace no válido" in visible_text(page.content.decode())
    # A quote's link is no manage-my-booking link, and the other way round.
    assert client.get(f"/a/{token}").status_code == 404


def test_another_companys_quote_link_shows_only_that_quote(
    client, sent_quote, other_company, sms_outbox
):
    _quote, path = sent_quote
    factories.catalog(other_company)
    bruno = factories.bruno(other_company)
    mail.outbox.clear()
    quote_create(company=other_company, contact=bruno, items=[QuoteItem("CAF-001", 5)])
    other_path = quote_path(mail.outbox[0].body)
    ours = visible_text(client.get(path).content.decode())
    theirs = visible_text(client.get(other_path).content.decode())
    assert "Peluquería Sol" in ours and "Clínica Luna" not in ours
    assert "Clínica Luna" in theirs and "Peluquería Sol" not in theirs
    assert "5 × 12,50 €" in theirs  # noqa: RUF001
    # A form of one company's page does nothing on the other's.
    token = form_token(client.get(other_path).content.decode())
    refused = client.post(path + "/accept", {"form_token": token})
    assert refused.status_code == 400
    assert sms_outbox == []
    assert not Conversation.objects.filter(external_id__startswith="link:").exists()


def test_requests_are_limited_per_link(client, sent_quote, settings):
    _quote, path = sent_quote
    settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK = (2, 600)
    assert client.get(path).status_code == 200
    assert client.get(path).status_code == 200
    limited = client.get(path)
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0


def test_an_english_company_shows_its_quote_in_english_in_its_time_zone(client, make_company):
    shop = make_company(name="Lisbon Coffee", language="en", timezone="Europe/Lisbon", country="PT")
    factories.catalog(shop)
    customer = factories.ana(shop, phone="+351912345678")
    mail.outbox.clear()
    quote = quote_create(company=shop, contact=customer, items=[QuoteItem("CAF-001", 1)])
    (email,) = mail.outbox
    assert "To see it and accept or decline it: " in email.body

    text = visible_text(client.get(quote_path(email.body)).content.decode())

    assert "Your quote" in text and "Accept the quote" in text and "Decline it" in text
    assert "Status sent" in text
    with translation.override("en"):
        shown = formats.date_format(timezone.localtime(quote.valid_until, shop.tz), "DATE_FORMAT")
    assert f"Valid until {shown}" in text
