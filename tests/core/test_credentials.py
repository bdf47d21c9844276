"""Both kinds of bearer credential, the Gateway's and the integration API's, live one lifecycle
(core.credentials): issued with the token shown once, authenticating, rotated, revoked; and
one staff admin (core.admin.CredentialAdmin) drives it for both."""

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from core.credentials.services import credential_issue, credential_revoke, credential_rotate
from core.errors import Conflict
from core.models import BearerCredential, GatewayCredential
from core.selectors import gateway_company_authenticate
from integration.models import IntegrationCredential
from integration.selectors import integration_credential_authenticate
from tests import factories

# The gateway's authentications are cached in the process: revoking must reach the cache too.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("process_caches_on")]


@dataclass
class Kind:
    model: type[BearerCredential]
    # The id of the credential a token authenticates as, or None: what each kind's own
    # authentication (the one its API calls) answers.
    authenticated: Callable[[str], int | None]
    issued_with: dict[str, str]
    admin_url: str


def _gateway_authenticated(token: str) -> int | None:
    company = gateway_company_authenticate(token)
    return None if company is None else company.gateway_credential_id


def _integration_authenticated(token: str) -> int | None:
    credential = integration_credential_authenticate(token)
    return None if credential is None else credential.pk


KINDS = [
    pytest.param(
        Kind(GatewayCredential, _gateway_authenticated, {}, "/admin/core/gatewaycredential/"),
        id="gateway",
    ),
    pytest.param(
        Kind(
            IntegrationCredential,
            _integration_authenticated,
            {"scope": IntegrationCredential.Scope.READ_WRITE},
            "/admin/integration/integrationcredential/",
        ),
        id="integration",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
def test_a_credential_is_issued_authenticates_is_rotated_and_revoked(kind, company):
    credential, token = credential_issue(
        kind.model, company=company, name="  Web chat ", **kind.issued_with
    )

    assert token.startswith(kind.model.TOKEN_PREFIX)
    assert credential.token_prefix == token[:10]
    assert credential.token_hash == kind.model.hash_token(token) != token
    assert credential.name == "Web chat"
    assert kind.authenticated(token) == credential.pk
    credential.refresh_from_db()
    assert credential.last_used_at is not None

    replacement, new_token = credential_rotate(credential=credential)

    assert kind.authenticated(token) is None
    assert kind.authenticated(new_token) == replacement.pk != credential.pk
    assert credential.revoked_at is not None
    assert (replacement.company_id, replacement.name) == (company.pk, "Web chat")
    for field, value in kind.issued_with.items():
        assert getattr(replacement, field) == value

    revoked = credential_revoke(credential=replacement)

    assert kind.authenticated(new_token) is None
    assert revoked.revoked_at is not None
    assert kind.model.objects.filter(revoked_at__isnull=True).count() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_revoked_credential_keeps_its_first_revocation_and_is_not_rotated(kind, company):
    credential, token = credential_issue(kind.model, company=company, name="ERP")
    stale = kind.model.objects.get(pk=credential.pk)  # read before the revocation
    first = credential_revoke(credential=credential).revoked_at

    assert credential_revoke(credential=stale).revoked_at == first
    with pytest.raises(Conflict) as refused:
        credential_rotate(credential=stale)

    assert refused.value.code == "credential_revoked"
    assert kind.model.objects.get(pk=credential.pk).revoked_at == first
    assert kind.model.objects.count() == 1
    assert kind.authenticated(token) is None


def test_a_credential_is_issued_with_only_what_its_kind_keeps(company):
    with pytest.raises(TypeError):
        credential_issue(GatewayCredential, company=company, name="gw", scope="read")
    assert not GatewayCredential.objects.exists()


@pytest.fixture
def credentials_admin(company):
    permissions = [
        *factories.app_permissions("core").filter(codename__endswith="gatewaycredential"),
        *factories.app_permissions("integration").filter(
            codename__endswith="integrationcredential"
        ),
    ]
    return factories.staff_member("maria", company, "admin", permissions=permissions)


@pytest.mark.parametrize("kind", KINDS)
def test_rotating_in_the_admin_shows_the_new_token_once_and_stops_the_old(
    kind, client, credentials_admin, company
):
    credential, token = credential_issue(
        kind.model, company=company, name="ERP", **kind.issued_with
    )
    client.force_login(credentials_admin)

    page = client.post(
        kind.admin_url, {"action": "rotate", "_selected_action": [credential.pk]}, follow=True
    ).content.decode()

    prefix = re.escape(kind.model.TOKEN_PREFIX)
    new_token = re.search(rf"{prefix}[A-Za-z0-9_-]{{40,}}", page).group(0)
    replacement = kind.model.objects.get(revoked_at__isnull=True)
    assert kind.authenticated(token) is None
    assert kind.authenticated(new_token) == replacement.pk
    assert new_token not in client.get(f"{kind.admin_url}{replacement.pk}/change/").content.decode()


@pytest.mark.parametrize("kind", KINDS)
def test_an_issued_token_keeps_its_company_in_the_admin(
    kind, client, credentials_admin, company, other_company
):
    """The company field is shown, not offered: the name changes, the company does not."""
    credential, _token = credential_issue(kind.model, company=company, name="ERP")
    client.force_login(credentials_admin)

    client.post(
        f"{kind.admin_url}{credential.pk}/change/",
        {"company": other_company.pk, "name": "ERP nuevo"},
    )

    credential.refresh_from_db()
    assert credential.name == "ERP nuevo"
    assert credential.company_id == company.pk
