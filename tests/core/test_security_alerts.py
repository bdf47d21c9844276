"""Security notices reach those who can act: a burst of failed identifications on a gateway
credential is emailed to the company's administrators only, with links to the credential;
it stands out on the dashboard while the credential is active; revoking it is one confirmed
action; and the event's page reads as labelled fields, not JSON."""

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import translation

from core.admin.security_events import DETAIL_FIELDS, security_event_details
from core.models import GatewayCredential, SecurityEvent
from core.security import security_event_staff_notify
from core.services import gateway_credential_issue
from tests.admin_pages import change_url
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def crew(company, other_company, make_staff):
    return {
        "maria": make_staff("maria", role="admin", email="maria@example.com"),
        "sara": make_staff("sara", role="supervisor", email="sara@example.com"),
        "pablo": make_staff("pablo", role="agent", email="pablo@example.com"),
        "luna": make_staff("luna", other_company, role="admin", email="luna@example.com"),
    }


@pytest.fixture
def credential(company) -> GatewayCredential:
    return gateway_credential_issue(company=company, name="whatsapp")[0]


@pytest.fixture
def burst(company, credential) -> SecurityEvent:
    """The event core.identity.limits records when a credential reaches its limit."""
    return SecurityEvent.objects.create(
        company=company,
        conversation_key="conv-probe-12",
        kind=SecurityEvent.Kind.IDENTIFICATION_BURST,
        credential=credential,
        detail={"failures": 50, "window_minutes": 60},
    )


def revoke_url(credential) -> str:
    return reverse("admin:core_gatewaycredential_revoke", args=[credential.pk])


def test_a_burst_is_emailed_to_the_company_administrators_with_the_credential_links(
    burst, credential, crew, settings
):
    settings.GARANTE_PUBLIC_URL = "https://garante.example.com"

    assert security_event_staff_notify(event_id=burst.pk) == 1

    (email,) = mail.outbox
    assert email.bcc == ["maria@example.com"]
    assert "whatsapp" in email.subject
    assert f"https://garante.example.com{change_url(credential)}" in email.body
    assert f"https://garante.example.com{revoke_url(credential)}" in email.body
    assert "se le pedirá confirmación" in email.body


def test_the_link_asks_before_revoking_and_the_confirmation_revokes(client, credential, crew):
    client.login(username="maria", password=PASSWORD)

    asked = client.get(revoke_url(credential))

    assert asked.status_code == 200
    text = asked.content.decode()
    assert "Va a revocar esta credencial" in text and "no se puede deshacer" in text
    credential.refresh_from_db()
    assert credential.revoked_at is None  # following the link changes nothing

    done = client.post(revoke_url(credential), follow=True)

    credential.refresh_from_db()
    assert credential.revoked_at is not None
    assert done.redirect_chain[-1][0] == change_url(credential)
    (told,) = [str(m) for m in done.context["messages"]]
    assert told.startswith("Se revocaron 1 credencial")
    assert 'id="credential-revoke"' not in done.content.decode()  # no button once revoked


def test_a_credential_revoked_meanwhile_is_said_alone(client, credential, crew):
    client.login(username="maria", password=PASSWORD)
    first = client.post(revoke_url(credential), follow=True)  # in another tab, say
    assert first.status_code == 200
    revoked_at = GatewayCredential.objects.get(pk=credential.pk).revoked_at

    again = client.post(revoke_url(credential), follow=True)

    assert [str(m) for m in again.context["messages"]] == ["whatsapp ya estaba revocada."]
    assert GatewayCredential.objects.get(pk=credential.pk).revoked_at == revoked_at


@pytest.mark.parametrize("who", ["pablo", "sara", "luna"])
def test_only_the_company_administrators_reach_the_revoke_page(client, credential, crew, who):
    client.login(username=who, password=PASSWORD)

    assert client.get(revoke_url(credential)).status_code in (302, 403, 404)
    assert client.post(revoke_url(credential)).status_code in (302, 403, 404)
    credential.refresh_from_db()
    assert credential.revoked_at is None


def test_the_dashboard_raises_a_burst_on_an_active_credential_until_it_is_revoked(
    client, burst, credential, crew
):
    client.login(username="maria", password=PASSWORD)

    page = client.get(reverse("admin:index")).content.decode()

    alert = page[page.index('id="panel-security_alerts"') :]
    alert = alert[: alert.index("</table>")]
    opening = page[page.rindex("<div", 0, page.index('id="panel-security_alerts"')) :][:120]
    assert "garante-alert" in opening
    assert f'href="{change_url(credential)}"' in alert and "garante-highlight" in alert
    assert "50 en 60 min" in alert
    recent = page[page.index('id="panel-security"') :]
    assert 'class="garante-highlight"' in recent[: recent.index("</table>")]

    credential.revoked_at = burst.created_at
    credential.save()
    assert 'id="panel-security_alerts"' not in client.get(reverse("admin:index")).content.decode()


def test_an_agent_sees_the_alert_leading_to_the_event_not_to_the_credential(
    client, burst, credential, crew
):
    client.login(username="pablo", password=PASSWORD)

    page = client.get(reverse("admin:index")).content.decode()

    alert = page[page.index('id="panel-security_alerts"') :]
    alert = alert[: alert.index("</table>")]
    assert f'href="{change_url(burst)}"' in alert
    assert "Avise a un administrador" in alert


def test_the_event_page_reads_as_labelled_fields_with_the_way_to_revoke(
    client, burst, credential, crew
):
    client.login(username="maria", password=PASSWORD)

    text = client.get(change_url(burst)).content.decode()

    details = text[text.index("<table class='garante-event-details'>") :]
    details = details[: details.index("</table>")]
    assert "{" not in details and "failures" not in details
    assert "identificaciones fallidas permitidas" in text and "<td>50</td>" in text
    assert "contadas en" in text and "60 minutos" in text
    assert f'href="{revoke_url(credential)}"' in text and "sigue activa" in text


def test_an_agent_reads_the_event_and_is_told_who_can_revoke(client, burst, crew):
    client.login(username="pablo", password=PASSWORD)

    text = client.get(change_url(burst)).content.decode()

    assert "Solo los administradores de la empresa pueden revocarla." in text
    assert 'id="burst-revoke"' not in text


def test_every_detail_the_code_writes_has_a_label(company):
    event = SecurityEvent(
        company=company,
        kind=SecurityEvent.Kind.IDENTITY_SWITCH,
        detail={"read_as": ["document", "phone"], "via": "email", "future_key": 3},
    )

    with translation.override("es"):
        shown = security_event_details(event)

    assert shown == [
        ("dato dado", "correo electrónico"),
        ("dato leído como", "número de documento, teléfono"),
        ("future key", "3"),
    ]
    assert {"failures", "window_minutes", "channel", "budget"} <= set(DETAIL_FIELDS)
