"""Verification by link: a company may send a one-tap link instead of the code, or beside it,
per channel. Tapping it (the POST of its page's one button) answers the challenge as its right
code would; a GET changes nothing; the link is single-use, expires with the code, is bound to
its conversation and is voided by an identity alarm as a code is."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.core.cache import caches
from django.test import Client
from django.utils import timezone

from core.customer_links import link_conversation, link_token
from core.durable import keeping_evidence
from core.errors import PermissionRefused, ValidationFailed
from core.identity import (
    conversation_is_verified,
    conversation_verification_status,
    identify_contact,
    require_step_up,
)
from core.models import Company, SecurityEvent, VerificationChallenge
from core.verification import (
    LinkAnswer,
    challenge_answer_by_link,
    challenge_deliver_once,
    challenge_issue,
    challenge_verify,
    check,
    seal_code,
)
from core.verification.issue import confirmation_challenge_issue
from core.verification.links import verification_link_digest, verification_link_key
from tests.customer_links import PUBLIC_URL, form_token, visible_text
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE, BRUNO_EMAIL

pytestmark = pytest.mark.django_db(transaction=True)

Status = VerificationChallenge.Status
Form = Company.VerificationForm
LINK = re.compile(re.escape(PUBLIC_URL) + r"(/v/[A-Za-z0-9_-]{40})")


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.GARANTE_PUBLIC_URL = PUBLIC_URL
    caches["shared"].clear()  # the pages' rate limits
    yield
    caches["shared"].clear()


@pytest.fixture
def by_link(company):
    company.verification_form_sms = Form.LINK
    company.verification_form_email = Form.LINK
    company.save()
    return company


def link_in(text: str) -> str:
    match = LINK.search(text)
    assert match, text
    return match.group(1)


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def send(contact, conversation, channel="sms") -> VerificationChallenge:
    return challenge_issue(contact=contact, channel=channel, conversation=conversation)


def tap(client: Client, path: str):
    """Open the link's page, then press its button: (the GET's answer, the POST's)."""
    page = client.get(path)
    return page, client.post(path, {"form_token": form_token(page.content.decode())})


def verified(conversation) -> bool:
    conversation.refresh_from_db()
    return conversation_is_verified(conversation)


def test_a_new_company_sends_the_code_as_before(company, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)

    assert company.verification_form_sms == company.verification_form_email == Form.CODE
    assert (challenge.sent_as, challenge.link_digest) == (Form.CODE, "")
    assert code_in(sms_outbox[0].body) and "/v/" not in sms_outbox[0].body


def test_a_company_set_to_link_texts_a_link_and_no_code(by_link, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)

    (sms,) = sms_outbox
    assert sms.to == ANA_PHONE
    assert LINK.search(sms.body) and not re.search(r"\b\d{6}\b", sms.body)
    assert challenge.sent_as == Form.LINK
    # The row names the link by a digest: the key is derived from the nonce and SECRET_KEY.
    key = verification_link_key(challenge.nonce)
    assert key not in challenge.link_digest and len(challenge.link_digest) == 64


def test_the_email_carries_the_link_too(by_link, ana, ana_conv):
    mail.outbox.clear()
    send(ana, ana_conv, channel="email")

    (email,) = mail.outbox
    assert email.to == [ANA_EMAIL] and LINK.search(email.body)


def test_both_sends_code_and_link_and_either_answers_once(company, ana, ana_conv, sms_outbox):
    company.verification_form_sms = Form.BOTH
    company.save()
    challenge = send(ana, ana_conv)
    body = sms_outbox[0].body

    keeping_evidence(
        lambda: challenge_verify(conversation=ana_conv, contact=ana, code=code_in(body))
    )
    page = Client().get(link_in(body))

    assert challenge.sent_as == Form.BOTH and verified(ana_conv)
    assert page.status_code == 410 and "ya se usó" in visible_text(page.content.decode())


def test_the_page_shows_one_button_and_a_first_name_and_a_get_changes_nothing(
    by_link, ana, ana_conv, sms_outbox
):
    challenge = send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)
    client = Client()

    pages = [client.get(path), client.get(path), client.head(path)]

    html = pages[0].content.decode()
    text = visible_text(html)
    assert [p.status_code for p in pages] == [200, 200, 200]
    assert "Hola, Ana." in text and "Confirme que es usted" in text
    assert html.count("<button") == 1 and "Sí, soy yo" in text
    for personal in ("García", ANA_PHONE, "600", ANA_EMAIL, ANA_DOCUMENT):
        assert personal not in text
    assert pages[0]["Cache-Control"] == "no-store, private"
    assert "noindex" in pages[0]["X-Robots-Tag"]
    challenge.refresh_from_db()
    assert challenge.status == Status.ACTIVE and not verified(ana_conv)


def test_tapping_the_link_verifies_the_conversation(by_link, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)
    with pytest.raises(PermissionRefused):
        require_step_up(conversation=ana_conv, action="update_contact_details")

    _page, tapped = tap(Client(), link_in(sms_outbox[0].body))

    assert tapped.status_code == 200
    assert "Listo, ya está confirmado" in visible_text(tapped.content.decode())
    challenge.refresh_from_db()
    assert challenge.status == Status.VERIFIED and challenge.verified_at is not None
    assert verified(ana_conv)
    require_step_up(conversation=ana_conv, action="update_contact_details")  # no longer raises


def test_the_page_speaks_the_companys_language(by_link, ana, ana_conv, sms_outbox):
    by_link.language = "en"
    by_link.save()
    send(ana, ana_conv)
    body = sms_outbox[0].body

    page, tapped = tap(Client(), link_in(body))

    assert "open this link" in body.lower() or "tap" in body.lower(), body
    assert "Hello, Ana." in visible_text(page.content.decode())
    assert '<html lang="en">' in page.content.decode()
    assert "Done" in visible_text(tapped.content.decode())


def test_a_double_submit_replays_and_a_second_form_finds_the_link_used(
    by_link, ana, ana_conv, sms_outbox
):
    send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)
    client = Client()
    page = client.get(path)
    second_tab = client.get(path)
    token = form_token(page.content.decode())

    first = client.post(path, {"form_token": token})
    ana_conv.refresh_from_db()
    verified_at = ana_conv.verified_at
    again = client.post(path, {"form_token": token})
    other = client.post(path, {"form_token": form_token(second_tab.content.decode())})
    reopened = client.get(path)

    assert [first.status_code, again.status_code] == [200, 200]
    assert "Listo" in visible_text(again.content.decode())
    ana_conv.refresh_from_db()
    assert ana_conv.verified_at == verified_at  # verified once
    assert other.status_code == reopened.status_code == 410
    for answer in (other, reopened):
        assert "Este enlace ya se usó" in visible_text(answer.content.decode())


def test_an_expired_link_verifies_nothing(by_link, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)
    page = Client().get(path)
    VerificationChallenge.objects.filter(pk=challenge.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    opened = Client().get(path)
    pressed = Client().post(path, {"form_token": form_token(page.content.decode())})

    assert opened.status_code == pressed.status_code == 410
    assert "Este enlace caducó" in visible_text(opened.content.decode())
    assert "Este enlace caducó" in visible_text(pressed.content.decode())
    assert not verified(ana_conv)


def test_an_altered_or_made_up_link_names_nothing(by_link, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)
    token = path.removeprefix("/v/")
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    # A real key under another page's tag (a quote link's, say) is no verification link.
    other_purpose = link_token(verification_link_key(challenge.nonce), "quote")

    answers = [Client().get(f"/v/{t}") for t in (altered, other_purpose, "short", "x" * 40)]
    posted = Client().post(f"/v/{altered}", {"form_token": "whatever"})

    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert posted.status_code == 404
    assert "Enlace no válido" in visible_text(answers[0].content.decode())
    assert not verified(ana_conv)


def test_a_form_of_another_link_is_refused(by_link, ana, bruno, ana_conv, make_identified):
    bruno_conv = make_identified(bruno, "conv-bruno")
    mail.outbox.clear()
    send(ana, ana_conv, channel="email")
    send(bruno, bruno_conv, channel="email")
    ana_path, bruno_path = (link_in(m.body) for m in mail.outbox)
    bruno_page = Client().get(bruno_path)

    answer = Client().post(ana_path, {"form_token": form_token(bruno_page.content.decode())})

    assert answer.status_code == 400
    assert "no es de esta página" in visible_text(answer.content.decode())
    assert not verified(ana_conv) and not verified(bruno_conv)


def test_the_link_verifies_its_own_conversation_only(
    by_link, ana, ana_conv, make_identified, sms_outbox
):
    other_conv = make_identified(ana, "conv-ana-2")
    send(ana, ana_conv)

    tap(Client(), link_in(sms_outbox[0].body))

    assert verified(ana_conv) and not verified(other_conv)
    with pytest.raises(ValidationFailed) as refused:
        keeping_evidence(
            lambda: challenge_verify(conversation=other_conv, contact=ana, code="123456")
        )
    assert refused.value.code == "no_code_pending"


def test_an_identity_alarm_voids_a_pending_link(by_link, ana, bruno, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)
    page = Client().get(path)
    with pytest.raises(PermissionRefused):
        identify_contact(conversation=ana_conv, kind="email", value=BRUNO_EMAIL)
    assert SecurityEvent.objects.filter(kind=SecurityEvent.Kind.IDENTITY_SWITCH).exists()

    opened = Client().get(path)
    challenge.refresh_from_db()
    assert opened.status_code == 410 and "se anuló" in visible_text(opened.content.decode())
    assert challenge.status == Status.ACTIVE  # the GET told it, and wrote nothing
    pressed = Client().post(path, {"form_token": form_token(page.content.decode())})

    assert pressed.status_code == 410
    assert "se anuló" in visible_text(pressed.content.decode())
    challenge.refresh_from_db()
    assert challenge.status == Status.REVOKED and not verified(ana_conv)
    assert "se anuló" in visible_text(Client().get(path).content.decode())


def test_a_newer_request_replaces_the_pending_link(by_link, ana, ana_conv, sms_outbox):
    send(ana, ana_conv)
    send(ana, ana_conv)
    old, new = (link_in(m.body) for m in sms_outbox)

    assert old != new
    opened = Client().get(old)
    assert opened.status_code == 410 and "sustituyó" in visible_text(opened.content.decode())
    _page, tapped = tap(Client(), new)
    assert tapped.status_code == 200 and verified(ana_conv)


def test_a_burst_of_link_requests_meets_the_code_limits(
    by_link, settings, ana, ana_conv, sms_outbox
):
    per_conversation, _period = settings.GARANTE_VERIFICATION_SENDS_PER_CONVERSATION
    limit = min(by_link.verification_codes_per_contact_per_hour, per_conversation)
    for _ in range(limit):
        send(ana, ana_conv)

    with pytest.raises(PermissionRefused) as refused:
        send(ana, ana_conv)

    assert refused.value.code == "too_many_codes"
    assert len(sms_outbox) == limit


def test_verify_code_tells_the_agent_a_link_was_sent(by_link, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)

    with pytest.raises(ValidationFailed) as refused:
        keeping_evidence(
            lambda: challenge_verify(conversation=ana_conv, contact=ana, code="123456")
        )

    assert refused.value.code == "link_sent"
    challenge.refresh_from_db()
    assert challenge.attempts == 0 and challenge.status == Status.ACTIVE


def test_a_code_only_challenge_takes_no_tap(company, ana, ana_conv, sms_outbox):
    challenge = send(ana, ana_conv)

    with pytest.raises(ValidationFailed) as refused:
        challenge_answer_by_link(challenge=challenge)

    assert refused.value.code == "link_invalid" and not verified(ana_conv)


def test_without_a_public_address_the_code_goes_instead(by_link, settings, ana, ana_conv):
    settings.GARANTE_PUBLIC_URL = ""
    challenge = send(ana, ana_conv)

    assert challenge.sent_as == Form.CODE and challenge.link_digest == ""


def test_the_page_is_rate_limited_per_link(by_link, settings, ana, ana_conv, sms_outbox):
    settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK = (3, 60)
    send(ana, ana_conv)
    path = link_in(sms_outbox[0].body)

    answers = [Client().get(path).status_code for _ in range(4)]

    assert answers == [200, 200, 200, 429]


def test_the_status_tells_what_is_pending_and_then_verified(by_link, ana, ana_conv, sms_outbox):
    before = conversation_verification_status(conversation=ana_conv, contact=ana)
    send(ana, ana_conv)
    pending = conversation_verification_status(conversation=ana_conv, contact=ana)
    tap(Client(), link_in(sms_outbox[0].body))
    after = conversation_verification_status(conversation=ana_conv, contact=ana)

    assert (before.verified, before.awaiting) == (False, None)
    assert (pending.verified, pending.awaiting) == (False, "link")
    assert (after.verified, after.awaiting) == (True, None)
    assert 0 < after.valid_for_minutes <= 15


def test_a_link_that_can_no_longer_be_written_goes_as_its_code(
    by_link, settings, ana, ana_conv, sms_outbox
):
    """The site's public address removed between the request and the delivery: the message
    carries the challenge's code, and verify_code takes codes for it again."""
    challenge = send(ana, ana_conv)
    sms_outbox.clear()
    VerificationChallenge.objects.filter(pk=challenge.pk).update(
        delivery_status=VerificationChallenge.Delivery.QUEUED
    )
    settings.GARANTE_PUBLIC_URL = ""

    outcome = challenge_deliver_once(
        challenge_id=challenge.pk, sealed_code=seal_code("000000", challenge.nonce), last_try=True
    )

    assert outcome == "sent"
    (sms,) = sms_outbox
    assert "/v/" not in sms.body and re.search(r"\b\d{6}\b", sms.body)
    challenge.refresh_from_db()
    assert (challenge.sent_as, challenge.link_digest) == (Form.CODE, "")
    with pytest.raises(ValidationFailed) as refused:
        keeping_evidence(
            lambda: challenge_verify(
                conversation=ana_conv, contact=ana, code=wrong(code_in(sms.body))
            )
        )
    assert refused.value.code == "wrong_code"


def test_another_purpose_registers_its_answer_and_the_same_page_serves_it(
    monkeypatch, by_link, ana, ana_conv
):
    """The page is the purpose's: a confirmation of another kind (here a contact change's
    challenge, standing in for an action to confirm) says its own words and runs its own
    effect, with the same checks and the same single use as a step-up."""
    done = []
    answer = LinkAnswer(
        effect=lambda challenge, conversation, now: done.append((challenge.pk, conversation.pk)),
        heading="Confirme la cancelación",
        text="Pulse para cancelar su cita con %(company)s.",
        button="Sí, cancelarla",
        done="Cita cancelada.",
    )
    monkeypatch.setitem(check._LINK_ANSWERS, VerificationChallenge.Purpose.CONTACT_CHANGE, answer)
    nonce = "f" * 32
    challenge = VerificationChallenge.objects.create(
        company=by_link,
        contact=ana,
        conversation=ana_conv,
        purpose=VerificationChallenge.Purpose.CONTACT_CHANGE,
        channel="sms",
        destination=ANA_PHONE,
        masked_destination="teléfono terminado en 22",
        nonce=nonce,
        code_hmac="0" * 64,
        sent_as=Form.LINK,
        link_digest=verification_link_digest(verification_link_key(nonce)),
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    path = "/v/" + link_token(verification_link_key(nonce), "verification")

    page, tapped = tap(Client(), path)
    again = Client().get(path)

    assert "Confirme la cancelación" in visible_text(page.content.decode())
    assert "Sí, cancelarla" in visible_text(page.content.decode())
    assert "Cita cancelada." in visible_text(tapped.content.decode())
    assert done == [(challenge.pk, ana_conv.pk)]
    assert not verified(ana_conv)  # its effect, not a step-up's
    assert again.status_code == 410


def test_a_customer_pages_own_code_stays_a_code(by_link, ana, sms_outbox):
    """The quote page asks for its step-up code in its own form: its conversation gets a code
    whatever the company sends in the chat."""
    conversation = link_conversation(company=by_link, contact=ana, key="k" * 24)

    challenge = send(ana, conversation)

    assert challenge.sent_as == Form.CODE and code_in(sms_outbox[0].body)


def test_a_confirmations_link_states_the_action_in_the_companys_language_and_only_answers_it(
    by_link, ana, ana_conv, sms_outbox
):
    """A confirmation of an action goes as a link too (the company's setting): its page says
    what the tap confirms in the words stored on the challenge, a GET changes nothing, and
    the tap marks the challenge answered without verifying the conversation."""
    by_link.language = "en"
    by_link.save()
    challenge = confirmation_challenge_issue(
        contact=ana,
        conversation=ana_conv,
        action="cancel_appointment",
        action_digest="d" * 64,
        action_summary="cancel your appointment AP-7K2F9Q",
    )
    body = sms_outbox[-1].body
    assert "to confirm that you want to cancel your appointment AP-7K2F9Q" in body
    assert not re.search(r"\b\d{6}\b", body)

    page, tapped = tap(Client(), link_in(body))

    text = visible_text(page.content.decode())
    assert "Hello, Ana." in text and "cancel your appointment AP-7K2F9Q" in text
    assert page.content.decode().count("<button") == 1
    assert "García" not in text and ANA_PHONE not in text
    assert tapped.status_code == 200
    challenge.refresh_from_db()
    assert challenge.sent_as == Form.LINK
    assert (challenge.status, challenge.consumed_at) == (Status.VERIFIED, None)
    assert not verified(ana_conv)
