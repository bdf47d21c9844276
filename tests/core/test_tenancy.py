"""Companies, contacts and gateway credentials: normalised identifiers, tokens, tenancy."""

import pytest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agenda.models import Professional, Service
from agenda.services import professional_create
from core.errors import NotFound, NotInCompany, ValidationFailed
from core.models import Contact, GatewayCredential
from core.selectors import gateway_company_authenticate
from core.services import contact_create, gateway_credential_issue, gateway_credential_revoke
from sales.models import Opportunity
from sales.services import opportunity_create
from support.services import case_open
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE

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
    assert contact.document_number == ANA_DOCUMENT
    assert contact.phone == ANA_PHONE
    assert contact.email == ANA_EMAIL


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
    ours = contact_create(company=company, first_name="Ana", phone=ANA_PHONE)
    theirs = contact_create(company=other_company, first_name="Ana", phone=ANA_PHONE)

    stored = Contact.objects.filter(phone=ANA_PHONE).order_by("pk")
    assert [(c.pk, c.company_id) for c in stored] == [
        (ours.pk, company.pk),
        (theirs.pk, other_company.pk),
    ]


def test_a_token_is_stored_only_as_a_hash_and_authenticates_its_company(company):
    credential, token = gateway_credential_issue(company=company, name="gw")
    before = timezone.now()

    assert token not in {credential.token_hash, credential.token_prefix}
    assert not GatewayCredential.objects.filter(token_hash=token).exists()
    assert gateway_company_authenticate(token) == company
    credential.refresh_from_db()
    assert before <= credential.last_used_at <= timezone.now()


def test_a_revoked_or_unknown_token_authenticates_nobody(company):
    credential, token = gateway_credential_issue(company=company, name="gw")
    gateway_credential_revoke(credential=credential)

    assert gateway_company_authenticate(token) is None
    assert gateway_company_authenticate("gt_made-up") is None
    assert gateway_company_authenticate("") is None


# Another company's record is answered as a missing one (core.errors.NotInCompany) ---------------


def test_another_companys_record_has_the_wire_body_of_a_missing_one():
    """Only the server side can tell the two apart: same type, message and code on the wire."""
    missing = NotFound(_("No encontré ese contacto."), code="contact_not_found")
    foreign = NotInCompany(_("No encontré ese contacto."), code="contact_not_found")

    assert isinstance(foreign, NotFound)
    assert foreign.as_dict() == missing.as_dict()
    assert foreign.http_status == missing.http_status == 404


def test_the_check_passes_the_companys_own_record_and_refuses_anothers(company, other_company):
    NotInCompany.check(company.pk, company.pk, "x", code="thing_not_found")

    with pytest.raises(NotInCompany) as refused:
        NotInCompany.check(other_company.pk, company.pk, "x", code="thing_not_found")
    assert refused.value.code == "thing_not_found"


def _stranger(other_company):
    return contact_create(company=other_company, first_name="Eva", phone="+34600999888")


def test_a_follow_up_case_cannot_link_to_another_companys_case(company, other_company):
    stranger = _stranger(other_company)
    theirs = case_open(company=other_company, contact=stranger, subject="S", description="d")
    ours = contact_create(company=company, first_name="Ana", phone=ANA_PHONE)

    with pytest.raises(NotInCompany) as refused:
        case_open(company=company, contact=ours, subject="S", description="d", related_case=theirs)

    assert refused.value.code == "case_not_found"


def test_an_opportunity_is_not_created_for_another_companys_contact(company, other_company):
    with pytest.raises(NotInCompany) as refused:
        opportunity_create(company=company, contact=_stranger(other_company), title="Café")

    assert refused.value.code == "contact_not_found"
    assert not Opportunity.objects.exists()


def test_a_professional_is_not_given_another_companys_service(company, other_company):
    theirs = Service.objects.create(company=other_company, name="Radiografía")

    with pytest.raises(NotInCompany) as refused:
        professional_create(company=company, display_name="Marta", services=[theirs])

    assert refused.value.code == "service_not_found"
    assert not Professional.objects.filter(company=company).exists()
