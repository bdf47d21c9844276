"""Staff settling a customer's quote or order tell the customer (sales.quote_messages): an order
cancelled, a quote recorded as rejected, a sent quote withdrawn, each with the reason, by email
(else SMS), once, respecting their opt-out; a customer with no channel left gets nothing and the
message is kept `not_sent` with why. The customer's own rejection, a draft withdrawn and the
beat's expiry past validity tell nobody."""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.services import contact_create
from sales.models import Quote, QuoteMessage
from sales.quote_messages import quote_message_deliver, quote_messages_sweep
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_expire,
    quote_reject,
    quotes_expire_due,
)
from sales.services.quote_pricing import QuoteItem

pytestmark = pytest.mark.django_db

BASKET = [QuoteItem("CAF-001", 1)]
S = QuoteMessage.Status


def sent_quote(company, contact, **kwargs) -> Quote:
    return quote_create(company=company, contact=contact, items=BASKET, **kwargs)


def test_cancelling_an_order_emails_the_customer_the_reason_once(
    company, ana, catalog, django_capture_on_commit_callbacks
):
    order = quote_accept(quote=sent_quote(company, ana))
    mail.outbox.clear()  # the quote's own email

    with django_capture_on_commit_callbacks(execute=True):
        quote_cancel(quote=order, reason="No se puede suministrar")
    with django_capture_on_commit_callbacks(execute=True):
        quote_cancel(quote=order, reason="otra vez")  # a second click: nothing more

    (email,) = mail.outbox
    assert email.to == [ana.email]
    assert email.subject == f"Peluquería Sol: su pedido {order.reference} está cancelado"
    assert "hemos cancelado su pedido" in email.body
    assert "Motivo: No se puede suministrar." in email.body
    (message,) = QuoteMessage.objects.filter(quote=order)
    assert (message.kind, message.status, message.reason) == (
        "order_cancelled",
        S.SENT,
        "No se puede suministrar",
    )
    assert message.masked_destination.endswith("@example.com")
    # Delivering the same message again (a second copy of the task) sends nothing.
    assert quote_message_deliver(message_id=message.pk, last_try=False) == "skipped"
    assert len(mail.outbox) == 1


def test_a_second_message_of_the_same_kind_for_one_quote_cannot_be_written(company, ana, catalog):
    order = quote_accept(quote=sent_quote(company, ana))
    quote_cancel(quote=order, reason="Duplicado")

    with pytest.raises(IntegrityError), transaction.atomic():
        QuoteMessage.objects.create(company=company, quote=order, kind="order_cancelled")


def test_staff_rejecting_a_quote_tell_the_customer_by_sms_when_they_have_no_email(
    company, catalog, sms_outbox, django_capture_on_commit_callbacks
):
    eva = contact_create(company=company, first_name="Eva", phone="+34600111333")
    quote = sent_quote(company, eva)

    with django_capture_on_commit_callbacks(execute=True):
        quote_reject(quote=quote, reason="Demasiado caro")

    (sms,) = sms_outbox
    assert sms.to == "+34600111333"
    assert f"hemos registrado que rechaza la cotización {quote.reference}" in sms.body
    assert "Motivo: Demasiado caro." in sms.body
    assert "€" not in sms.body  # no amount on a lock screen


def test_the_customer_rejecting_it_themselves_is_told_nothing_more(company, ana, catalog):
    quote = sent_quote(company, ana)

    quote_reject(quote=quote, reason="Caro", contact=ana)

    assert not QuoteMessage.objects.filter(quote=quote).exists()


def test_withdrawing_a_sent_quote_tells_the_customer_a_draft_and_the_beats_expiry_do_not(
    company, ana, catalog
):
    sent = sent_quote(company, ana)
    draft = sent_quote(company, ana, send=False)
    lapsed = sent_quote(company, ana, now=timezone.now() - timedelta(days=30))

    quote_expire(quote=sent, reason="Cambiaron los precios")
    quote_expire(quote=draft, reason="Borrador viejo")
    assert quotes_expire_due() == 1

    (message,) = QuoteMessage.objects.all()
    assert (message.quote_id, message.kind) == (sent.pk, "quote_withdrawn")
    lapsed.refresh_from_db()
    assert lapsed.state == Quote.State.EXPIRED


def test_an_opted_out_channel_is_skipped_and_one_opted_out_of_all_gets_nothing(
    company, catalog, sms_outbox, django_capture_on_commit_callbacks
):
    both = contact_create(
        company=company, first_name="Iris", phone="+34600111444", email="iris@example.com"
    )
    both.email_opt_out = True
    both.save(update_fields=["email_opt_out"])
    quote = sent_quote(company, both)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        quote_reject(quote=quote, reason="No lo necesita")
    (texted,) = QuoteMessage.objects.filter(quote=quote)
    assert (texted.channel, texted.status) == ("sms", S.SENT)
    assert len(sms_outbox) == 1 and mail.outbox == []

    both.sms_opt_out = True
    both.save(update_fields=["sms_opt_out"])
    order = quote_accept(quote=sent_quote(company, both))
    quote_cancel(quote=order, reason="Duplicado")
    (kept,) = QuoteMessage.objects.filter(quote=order)
    assert (kept.status, kept.error) == (S.NOT_SENT, "opted out")


def test_a_customer_without_phone_or_email_keeps_the_change_and_the_message_not_sent(
    company, catalog
):
    walk_in = contact_create(company=company, first_name="Pedro")
    order = quote_accept(quote=sent_quote(company, walk_in))

    quote_cancel(quote=order, reason="A petición del cliente")

    order.refresh_from_db()
    assert order.state == Quote.State.CANCELLED
    (message,) = QuoteMessage.objects.filter(quote=order)
    assert (message.status, message.error, message.channel) == (
        S.NOT_SENT,
        "no phone or email",
        "",
    )


def test_a_customer_who_opts_out_before_the_message_leaves_is_not_sent_it(company, ana, catalog):
    order = quote_accept(quote=sent_quote(company, ana))
    quote_cancel(quote=order, reason="Duplicado")  # not committed: its task has not run
    mail.outbox.clear()
    ana.email_opt_out = True
    ana.save(update_fields=["email_opt_out"])

    message = QuoteMessage.objects.get(quote=order)
    assert quote_message_deliver(message_id=message.pk, last_try=False) == "skipped"

    message.refresh_from_db()
    assert (message.status, message.error) == (S.NOT_SENT, "opted out")
    assert mail.outbox == []


def test_a_message_lost_on_its_way_is_published_again_by_the_sweep_and_sent_once(
    company, ana, catalog
):
    order = quote_accept(quote=sent_quote(company, ana))
    quote_cancel(quote=order, reason="Duplicado")  # its task never published (no commit)
    mail.outbox.clear()
    later = timezone.now() + timedelta(minutes=20)

    assert quote_messages_sweep(now=timezone.now()).queued == 0  # not lost yet
    result = quote_messages_sweep(now=later)  # eager Celery: the task runs at once

    assert (result.queued, result.failed) == (1, 0)
    assert len(mail.outbox) == 1
    assert QuoteMessage.objects.get(quote=order).status == S.SENT
    assert quote_messages_sweep(now=later + timedelta(minutes=20)).queued == 0


def test_the_message_is_in_the_companys_language(make_company, catalog, ana):
    from sales.quote_messages import message_text

    english = make_company(name="Sun Shop", language="en")
    order = quote_accept(quote=sent_quote(ana.company, ana))
    quote_cancel(quote=order, reason="It cannot be supplied")
    message = QuoteMessage.objects.get(quote=order)
    order.company = english  # told as the English company would tell it
    message.quote = order

    subject, body = message_text(message)

    assert subject == f"Sun Shop: your order {order.reference} is cancelled"
    assert "we have cancelled your order" in body
    assert "Reason: It cannot be supplied." in body
