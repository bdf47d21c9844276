"""Staff see codes and security events of their companies, revoke and resend codes, issue a
code for a caller — and can never read a code back."""

import re

import pytest
from django.core import mail

from core.identity import security_event_record
from core.models import (
    Conversation,
    SecurityEvent,
    StepUpPolicy,
    VerificationChallenge,
)
from core.services import contact_create
from core.verification import challenge_issue
from tests.factories import ANA_EMAIL, ANA_PHONE_NATIONAL

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.staff_permissions("core")]


def code_in(text):
    return re.search(r"\b(\d{6})\b", text).group(1)


def test_the_code_list_shows_status_and_masked_destination_but_never_the_code(
    client, staff, ana, ana_conv, sms_outbox
):
    challenge = challenge_issue(contact=ana, channel="sms", conversation=ana_conv)
    client.force_login(staff)

    listing = client.get("/admin/core/verificationchallenge/").content.decode()
    detail = client.get(f"/admin/core/verificationchallenge/{challenge.pk}/change/")

    page = listing + detail.content.decode()
    assert detail.status_code == 200
    assert "teléfono terminado en 22" in page
    assert code_in(sms_outbox[0].body) not in page
    challenge.refresh_from_db()
    assert challenge.code_hmac not in page and challenge.nonce not in page
    assert ANA_PHONE_NATIONAL not in page


def test_staff_do_not_see_another_companys_codes(client, staff, other_company, sms_outbox):
    zoe = contact_create(company=other_company, first_name="Zoe", phone="600555666")
    conversation = Conversation.objects.create(company=other_company, external_id="conv-zoe")
    conversation.contact = zoe
    conversation.save()
    challenge_issue(contact=zoe, channel="sms", conversation=conversation)
    client.force_login(staff)

    page = client.get("/admin/core/verificationchallenge/").content.decode()

    assert "Zoe" not in page


def test_staff_revoke_a_code(client, staff, ana, ana_conv, sms_outbox):
    challenge = challenge_issue(contact=ana, channel="sms", conversation=ana_conv)
    client.force_login(staff)

    client.post(
        "/admin/core/verificationchallenge/",
        {"action": "revoke", "_selected_action": [challenge.pk]},
    )

    challenge.refresh_from_db()
    assert challenge.status == VerificationChallenge.Status.REVOKED


def test_staff_resend_a_fresh_code(client, staff, ana, ana_conv, sms_outbox):
    challenge = challenge_issue(contact=ana, channel="sms", conversation=ana_conv)
    client.force_login(staff)

    client.post(
        "/admin/core/verificationchallenge/",
        {"action": "resend", "_selected_action": [challenge.pk]},
    )

    assert len(sms_outbox) == 2
    statuses = VerificationChallenge.objects.order_by("pk").values_list("status", flat=True)
    assert list(statuses) == ["revoked", "active"]


def test_staff_issue_a_code_for_the_caller_of_a_conversation(
    client, staff, ana, ana_conv, sms_outbox
):
    client.force_login(staff)

    response = client.post(
        "/admin/core/conversation/",
        {"action": "send_code_by_email", "_selected_action": [ana_conv.pk]},
        follow=True,
    )

    assert [m.to for m in mail.outbox] == [[ANA_EMAIL]]
    challenge = VerificationChallenge.objects.get()
    assert challenge.issued_by == staff
    assert [str(m) for m in response.context["messages"]] == [
        "conv-ana: un código va de camino a a***@example.com."
    ]


def test_security_events_are_listed_for_staff(client, staff, ana, ana_conv):
    security_event_record(
        conversation=ana_conv, kind=SecurityEvent.Kind.IDENTITY_SWITCH, contact=ana
    )
    client.force_login(staff)

    page = client.get("/admin/core/securityevent/").content.decode()

    assert "conv-ana" in page


def test_staff_edit_which_actions_need_step_up(client, staff, company):
    client.force_login(staff)

    response = client.post(
        "/admin/core/stepuppolicy/add/",
        {"company": company.pk, "actions_text": "accept_quote\ncancel_appointment\n"},
        follow=True,
    )

    assert StepUpPolicy.objects.get(company=company).actions == [
        "accept_quote",
        "cancel_appointment",
    ]
    # Servers keep a policy for the process cache's lifetime: staff are told so.
    policy = StepUpPolicy.objects.get(company=company)
    assert [str(m) for m in response.context["messages"]] == [
        "Todos los servidores aplican este cambio en 1 segundo como máximo.",
        f'Se ha añadido «<a href="/admin/core/stepuppolicy/{policy.pk}'
        f'/change/">{company.name}: accept_quote, cancel_appointment</a>» '
        "(política de verificación reforzada).",
    ]


@pytest.mark.parametrize("name", ["list_services", "verify_code", "request_verification_code"])
def test_a_policy_lists_only_tools_that_act_for_an_identified_customer(
    client, staff, company, name
):
    """A catalogue read has nobody to verify, and asking a code to ask for a code locks every
    customer out: listed, either would seem to protect something and protect nothing."""
    client.force_login(staff)

    response = client.post(
        "/admin/core/stepuppolicy/add/",
        {"company": company.pk, "actions_text": f"accept_quote\n{name}\n"},
    )

    assert response.status_code == 200
    assert name in str(response.context["adminform"].form.errors["actions_text"])
    assert not StepUpPolicy.objects.filter(company=company).exists()


def identify_through(company, credential, value):
    """identify_contact by phone in a new conversation, as a call through `credential` makes
    it (a unit of work that keeps its evidence: core.durable); the contact bound, or None in
    verified mode (NotFound propagates)."""
    from core.durable import keeping_evidence
    from core.identity import identify_contact

    gateway_company = type(company).objects.get(pk=company.pk)
    gateway_company.gateway_credential_id = credential.pk
    conversation = Conversation.objects.create(
        company=company, external_id=f"conv-{VerificationChallenge.objects.count()}-{value}"
    )
    conversation.company = gateway_company
    return keeping_evidence(
        lambda: identify_contact(conversation=conversation, kind="phone", value=value)
    )


def test_the_dashboard_shows_what_verified_mode_cost_per_credential(
    client, staff, company, ana, sms_outbox
):
    from core.errors import NotFound
    from core.services import gateway_credential_issue

    company.identify_failures_per_credential = 2
    company.verification_codes_per_contact_per_hour = 1
    company.save()
    credential = gateway_credential_issue(company=company, name="web chat")[0]
    for phone in ("699000001", "699000002"):
        with pytest.raises(NotFound):
            identify_through(company, credential, phone)
    # Verified mode: Ana twice (the second over her hourly limit), and nobody once.
    for phone in (ANA_PHONE_NATIONAL, ANA_PHONE_NATIONAL, "699000003"):
        assert identify_through(company, credential, phone) is None
    client.force_login(staff)

    panels = {p.key: p for p in client.get("/admin/").context["dashboard_panels"]}

    panel = panels["verified_mode"]
    assert len(sms_outbox) == 1
    assert panel.total == 1
    assert [[str(cell) for cell in row["cells"]] for row in panel.rows] == [
        ["sí", str(credential), "1 / 200", "1", "1 / 1"]
    ]
    listed = client.get(panel.more_url)
    assert listed.status_code == 200
    assert len(listed.context["cl"].result_list) == 3


def test_staff_set_the_budgets_of_codes_on_the_company_page(client, staff, company):
    client.force_login(staff)
    page = client.get(f"/admin/core/company/{company.pk}/change/").content.decode()

    assert 'name="verified_mode_codes_per_credential_per_hour"' in page
    assert 'name="verification_codes_per_contact_per_hour"' in page
