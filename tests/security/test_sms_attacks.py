"""Attacks that make a business pay for SMS, over real HTTP: a live server, the integration API
and the tool API's REST mirror, and an SMS provider speaking Twilio's API on a local port
(pytest-httpserver), which counts what would have been billed.

docs/threats/sms.md lists each attack with what it costs the attacker and the business.
"""

import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.core import mail

from core.models import Company, Contact, OutboxMessage, SecurityEvent, VerificationChallenge
from core.services import gateway_credential_issue
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue
from tests import factories
from tests.conftest import ToolClient
from tests.factories import ANA_DOCUMENT, ANA_PHONE, BRUNO_DOCUMENT

pytestmark = pytest.mark.django_db(transaction=True)

TWILIO_PATH = "/2010-04-01/Accounts/AC123/Messages.json"
PREMIUM_ES = "+34 803 123 456"  # Spain's 803: premium-rate
PREMIUM_US = "+1 900 555 0123"  # the issue's: US premium-rate
SIERRA_LEONE = "+232 77 000 001"  # the issue's: a mobile range used in SMS fraud


@pytest.fixture
def provider(httpserver, settings):
    """Twilio on a local port: every request it gets is an SMS the business would pay for."""
    settings.GARANTE_SMS_BACKEND = "twilio"
    settings.GARANTE_TWILIO_API_URL = httpserver.url_for("/")
    settings.GARANTE_TWILIO_ACCOUNT_SID = "AC123"
    settings.GARANTE_TWILIO_AUTH_TOKEN = "secret-token"
    settings.GARANTE_TWILIO_FROM = "+34911000000"
    settings.GARANTE_SMS_TIMEOUT_SECONDS = 2
    httpserver.expect_request(TWILIO_PATH, method="POST").respond_with_json(
        {"sid": "SM1", "status": "queued"}, status=201
    )
    return httpserver


def texted(provider) -> list[str]:
    """The numbers the provider was asked to text, in order."""
    return [request.form["To"] for request, _response in provider.log]


@pytest.fixture
def integration(live_server) -> Iterator:
    """`integration(company)`: an httpx client of the company's integration API (/api/v1/)."""
    clients: list[httpx.Client] = []

    def make(company: Company) -> httpx.Client:
        _credential, token = integration_credential_issue(
            company=company, name="web shop", scope=IntegrationCredential.Scope.READ_WRITE
        )
        client = httpx.Client(
            base_url=f"{live_server.url}/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()  # frees the live server's thread and its database connection


def create_contact(client: httpx.Client, phone: str) -> httpx.Response:
    return client.post(
        "/contacts",
        json={"first_name": "Mallory", "phone": phone},
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )


@pytest.fixture
def tools(live_server) -> Iterator:
    """`tools(company)`: a client of the company's tool API (REST mirror), one conversation per
    `conversation=` given to its calls."""
    clients: list[ToolClient] = []

    def make(company: Company) -> ToolClient:
        token = gateway_credential_issue(company=company, name="gateway")[1]
        client = ToolClient(live_server.url, token, "conv-unused")
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.http.close()


def request_code(client: ToolClient, document: str) -> httpx.Response:
    """What anyone talking to the agent can do: say a customer's document, ask for a code."""
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    identified = client.call(
        "identify_contact",
        {"document": document},
        key=uuid.uuid4().hex,
        conversation_id=conversation,
    )
    assert identified.status_code == 200, identified.text
    return client.call(
        "request_verification_code",
        {"identifier": document, "channel": "sms"},
        key=uuid.uuid4().hex,
        conversation_id=conversation,
    )


# --- Where a phone is entered --------------------------------------------------------------


def test_a_premium_rate_number_is_refused_with_a_typed_error_and_nothing_saved(
    integration, make_company
):
    """Before, both were saved, and every appointment message or code to them paid their
    owner."""
    spain = make_company(country="ES")
    united_states = make_company(country="US")

    spanish = create_contact(integration(spain), PREMIUM_ES)
    american = create_contact(integration(united_states), PREMIUM_US)

    for response in (spanish, american):
        assert response.status_code == 422, response.text
        assert response.json()["error_type"] == "VALIDATION"
        assert response.json()["code"] == "phone_not_mobile"
        assert "móvil" in response.json()["user_message"]
    assert Contact.objects.count() == 0


def test_a_phone_of_a_country_the_company_does_not_serve_is_refused_and_nothing_saved(
    integration, make_company
):
    """Before, a Spanish shop registered a Sierra Leone mobile and a US premium number."""
    shop = make_company(country="ES")
    client = integration(shop)

    answers = [create_contact(client, phone) for phone in (SIERRA_LEONE, PREMIUM_US)]

    assert [(a.status_code, a.json()["code"]) for a in answers] == [
        (422, "phone_country_not_served"),
        (422, "phone_country_not_served"),
    ]
    assert Contact.objects.count() == 0


# --- Where an SMS leaves -----------------------------------------------------------------


def test_a_premium_rate_number_already_on_file_gets_no_code(tools, make_company, provider):
    """A number saved before the rule (or by a path that skipped it) is refused again when the
    SMS would leave: the provider gets nothing, and the code's row says why."""
    shop = make_company(country="ES")
    Contact.objects.create(
        company=shop, first_name="Mallory", document_number=ANA_DOCUMENT, phone="+34803123456"
    )

    answer = request_code(tools(shop), ANA_DOCUMENT)

    assert answer.status_code == 200, answer.text
    assert texted(provider) == []
    challenge = VerificationChallenge.objects.get()
    assert challenge.delivery_status == VerificationChallenge.Delivery.FAILED
    assert "phone_not_mobile" in challenge.delivery_error


def test_codes_past_the_hourly_budget_reach_no_provider_and_the_admins_hear_once(
    tools, make_company, make_staff, provider
):
    """Before, every request of every conversation was texted: a script asking codes for the
    customers it knows ran up the bill without limit."""
    shop = make_company(country="ES", sms_hourly_budget=2)
    make_staff("boss", shop, role="admin", email="boss@example.com")
    make_staff("clerk", shop, role="agent", email="clerk@example.com")
    documents = [ANA_DOCUMENT, BRUNO_DOCUMENT, "Y1234567X", "Z1234567R"]
    for n, document in enumerate(documents):
        factories.contact(shop, document_number=document, phone=f"+3460011122{n}")
    client = tools(shop)

    answers = [request_code(client, document) for document in documents]

    assert [a.status_code for a in answers] == [200] * 4
    assert texted(provider) == ["+34600111220", "+34600111221"]
    refused = VerificationChallenge.objects.filter(
        delivery_status=VerificationChallenge.Delivery.FAILED
    )
    assert refused.count() == 2
    assert all("hourly SMS budget" in c.delivery_error for c in refused)
    assert SecurityEvent.objects.filter(kind=SecurityEvent.Kind.SMS_BUDGET_REACHED).count() == 1
    [alert] = mail.outbox
    assert alert.bcc == ["boss@example.com"] or alert.to == ["boss@example.com"]
    assert "SMS" in alert.subject


def test_a_sandbox_texts_no_one_whatever_provider_is_configured(tools, make_company, provider):
    """Before, the sandbox's made-up customers (+34600111222) were texted through the real
    provider. Its code is kept in its outbox, where the tester reads it, and it verifies."""
    sandbox = make_company(environment=Company.Environment.SANDBOX)
    factories.ana(sandbox)
    client = tools(sandbox)
    conversation = "conv-sandbox"
    client.call(
        "identify_contact", {"document": ANA_DOCUMENT}, key="k1", conversation_id=conversation
    )

    client.call(
        "request_verification_code",
        {"identifier": ANA_DOCUMENT, "channel": "sms"},
        key="k2",
        conversation_id=conversation,
    )

    assert texted(provider) == []
    kept = OutboxMessage.objects.get(company=sandbox)
    assert (kept.channel, kept.destination) == ("sms", ANA_PHONE)
    code = re.search(r"\b(\d{6})\b", kept.body).group(1)
    verified = client.call(
        "verify_code",
        {"identifier": ANA_DOCUMENT, "code": code},
        key="k3",
        conversation_id=conversation,
    )
    assert verified.status_code == 200, verified.text
    assert verified.json()["verified"] is True
