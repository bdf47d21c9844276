"""Companies, contacts and gateway credentials: normalised identifiers, tokens, tenancy."""

import pytest

from core.errors import ValidationFailed
from core.models import GatewayCredential
from core.selectors import gateway_company_authenticate
from core.services import contact_create, gateway_credential_issue, gateway_credential_revoke

pytestmark = pytest.mark.django_db


def test_a_contacts_identifiers_are_stored_normalised(company):
    contact = contact_create(
        company=company,
        first_name=" Ana ",
        document_number="12.345.678-z",
        phone="600 11 12 22",
        email=" Ana@Example.COM ",
    )

    assert contact.first_name == "Ana"
    assert contact.document_number == "12345678Z"
    assert contact.phone == "+34600111222"
    assert contact.email == "ana@example.com"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("phone", "12", "invalid_phone"),
        ("email", "not-an-email", "invalid_email"),
        ("document_number", "??", "invalid_document"),
    ],
)
def test_an_invalid_identifier_is_a_typed_validation_error(company, field, value, code):
    with pytest.raises(ValidationFailed) as raised:
        contact_create(company=company, first_name="Ana", **{field: value})

    assert raised.value.code == code


def test_the_same_phone_may_belong_to_contacts_of_two_companies(company, other_company):
    contact_create(company=company, first_name="Ana", phone="+34600111222")
    contact_create(company=other_company, first_name="Ana", phone="+34600111222")


def test_a_token_is_stored_only_as_a_hash_and_authenticates_its_company(company):
    credential, token = gateway_credential_issue(company=company, name="gw")

    assert token not in {credential.token_hash, credential.token_prefix}
    assert not GatewayCredential.objects.filter(token_hash=token).exists()
    assert gateway_company_authenticate(token) == company
    credential.refresh_from_db()
    assert credential.last_used_at is not None


def test_a_revoked_or_unknown_token_authenticates_nobody(company):
    credential, token = gateway_credential_issue(company=company, name="gw")
    gateway_credential_revoke(credential=credential)

    assert gateway_company_authenticate(token) is None
    assert gateway_company_authenticate("gt_made-up") is None
    assert gateway_company_authenticate("") is None
