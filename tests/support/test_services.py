"""Support services: opening cases, comments and the rules around them."""

import io
import re

import pytest

from core import references
from core.errors import NotInCompany, PermissionRefused, ValidationFailed
from core.models import Company
from core.services import contact_create
from support import services
from support.guards import case_lock
from support.models import Case, CaseComment, SupportSettings
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT

pytestmark = pytest.mark.django_db
S = Case.State


def test_a_new_case_is_open_with_a_public_reference_unique_in_the_company(company, ana):
    first = services.case_open(company=company, contact=ana, subject="A", description="a")
    second = services.case_open(company=company, contact=ana, subject="B", description="b")

    assert first.state == S.OPEN
    assert re.fullmatch(r"CS-[2-9A-HJKMNP-TV-Z]{6}", first.reference)
    assert first.reference != second.reference


def test_a_reference_collision_draws_another_reference(company, ana, monkeypatch):
    taken = services.case_open(company=company, contact=ana, subject="A", description="a")
    draws = iter([taken.reference, "CS-NEWONE"])
    monkeypatch.setattr(references, "new_reference", lambda prefix: next(draws))

    case = services.case_open(company=company, contact=ana, subject="B", description="b")

    assert case.reference == "CS-NEWONE"


def test_an_empty_subject_or_description_is_refused(company, ana):
    with pytest.raises(ValidationFailed) as failure:
        services.case_open(company=company, contact=ana, subject="  ", description="x")
    assert failure.value.code == "subject_required"
    with pytest.raises(ValidationFailed) as failure:
        services.case_open(company=company, contact=ana, subject="x", description="")
    assert failure.value.code == "description_required"
    assert not Case.objects.exists()


def test_a_follow_up_case_links_to_the_customers_closed_case(company, ana, make_case):
    closed = make_case(S.CLOSED)

    follow_up = services.case_open(
        company=company, contact=ana, subject="Sigue", description="x", related_case=closed
    )

    assert follow_up.related_case == closed
    assert follow_up.state == S.OPEN
    closed.refresh_from_db()
    assert closed.state == S.CLOSED


def test_a_follow_up_cannot_link_to_another_customers_case(company, ana, bruno, make_case):
    theirs = make_case(S.CLOSED, for_contact=bruno)

    with pytest.raises(PermissionRefused):
        services.case_open(
            company=company, contact=ana, subject="S", description="x", related_case=theirs
        )


def test_a_customer_comment_on_a_closed_case_is_refused_with_the_state(make_case, ana):
    case = make_case(S.CLOSED)

    with pytest.raises(ValidationFailed) as failure:
        services.case_comment_add(case=case, body="Sigue fallando", author_contact=ana)

    assert failure.value.extras == {"state": "closed", "state_label": "cerrado"}
    assert failure.value.code == "case_closed"
    assert case.reference in str(failure.value.user_message)
    assert "caso nuevo" in str(failure.value.user_message)
    assert not CaseComment.objects.exists()


def test_staff_cannot_comment_on_a_closed_case_either(make_case, make_staff):
    case = make_case(S.CLOSED)

    with pytest.raises(ValidationFailed):
        services.case_comment_add(
            case=case, body="nota", author_user=make_staff("marta"), public=False
        )


def test_a_customer_answer_moves_a_waiting_case_back_to_in_progress(make_case, ana):
    case = make_case(S.WAITING_CUSTOMER)

    services.case_comment_add(case=case, body="Es el modelo X200", author_contact=ana)

    case.refresh_from_db()
    assert case.state == S.IN_PROGRESS


@pytest.mark.parametrize("state", [S.OPEN, S.IN_PROGRESS, S.RESOLVED])
def test_a_customer_comment_leaves_other_states_alone(make_case, ana, state):
    case = make_case(state)

    services.case_comment_add(case=case, body="Un dato más", author_contact=ana)

    case.refresh_from_db()
    assert case.state == state


def test_a_staff_comment_does_not_end_the_wait_for_the_customer(make_case, make_staff):
    case = make_case(S.WAITING_CUSTOMER)

    services.case_comment_add(case=case, body="¿Alguna novedad?", author_user=make_staff("m"))

    case.refresh_from_db()
    assert case.state == S.WAITING_CUSTOMER


def test_a_customer_cannot_comment_on_another_customers_case(make_case, bruno):
    case = make_case(S.IN_PROGRESS)

    with pytest.raises(PermissionRefused):
        services.case_comment_add(case=case, body="hola", author_contact=bruno)
    assert not CaseComment.objects.exists()


def test_customer_comments_are_always_public_and_staff_may_keep_theirs_internal(
    make_case, ana, make_staff
):
    case = make_case(S.IN_PROGRESS)

    customer = services.case_comment_add(case=case, body="x", author_contact=ana, public=False)
    internal = services.case_comment_add(
        case=case, body="y", author_user=make_staff("m"), public=False
    )

    assert customer.public is True
    assert internal.public is False


def test_the_customer_says_it_is_not_fixed_and_the_case_goes_back_to_work(make_case, ana):
    case = make_case(S.RESOLVED)

    case = services.case_reopen(case=case, contact=ana, message="Sigue sin centrifugar")

    assert case.state == S.IN_PROGRESS
    assert case.comments.get().body == "Sigue sin centrifugar"


def test_the_lock_reads_the_case_as_it_is_now_with_its_company_in_one_statement(
    make_case, company, django_assert_num_queries
):
    case = make_case(S.OPEN)
    stale = Case.objects.get(pk=case.pk)
    services.case_start(case=case)

    with django_assert_num_queries(1):
        locked = case_lock(stale)
        assert (locked.pk, locked.state, locked.company) == (case.pk, S.IN_PROGRESS, company)


def test_a_closed_case_takes_no_comment_from_its_customer_nor_from_staff(
    make_case, ana, make_staff
):
    case = make_case(S.CLOSED)

    for author in ({"author_contact": ana}, {"author_user": make_staff("marta")}):
        with pytest.raises(ValidationFailed) as refused:
            services.case_comment_add(case=case, body="¿Novedades?", **author)
        assert (refused.value.code, refused.value.extras["state"]) == ("case_closed", S.CLOSED)

    assert not CaseComment.objects.filter(case=case).exists()


def test_another_customer_cannot_confirm_or_reopen_a_case(make_case, bruno):
    case = make_case(S.RESOLVED)

    with pytest.raises(PermissionRefused):
        services.case_close(case=case, contact=bruno)
    with pytest.raises(PermissionRefused):
        services.case_reopen(case=case, contact=bruno, message="no")
    case.refresh_from_db()
    assert case.state == S.RESOLVED


def test_an_assignee_must_be_staff_of_the_company(make_case, make_staff, other_company):
    case = make_case(S.OPEN)
    outsider = make_staff("pedro", other_company)

    with pytest.raises(ValidationFailed):
        services.case_update(
            case=case, priority=Case.Priority.HIGH, assignee=outsider, internal_notes=""
        )
    agent = make_staff("marta")
    case = services.case_update(
        case=case, priority=Case.Priority.HIGH, assignee=agent, internal_notes="VIP"
    )
    assert (case.priority, case.assignee, case.internal_notes) == ("high", agent, "VIP")


def test_support_settings_are_created_on_demand_with_the_default(company):
    assert not SupportSettings.objects.filter(company=company).exists()

    settings = services.support_settings_get(company=company)

    assert settings.auto_close_after_days == SupportSettings.DEFAULT_AUTO_CLOSE_DAYS
    assert services.support_settings_get(company=company).pk == settings.pk


def test_a_contact_of_another_company_cannot_open_a_case_here(company, other_company):
    """Another company's contact is answered as a missing one, never as someone else's."""
    stranger = contact_create(company=other_company, first_name="Eva", email="eva@example.com")

    with pytest.raises(NotInCompany) as refused:
        services.case_open(company=company, contact=stranger, subject="S", description="x")

    assert refused.value.error_type == "NOT_FOUND"
    assert refused.value.code == "contact_not_found"
    assert not Case.objects.exists()


def test_the_sandbox_gets_open_and_closed_cases_for_its_contacts_once(company, ana):
    from support import sandbox

    contact_create(company=company, first_name="Bruno", document_number=BRUNO_DOCUMENT)

    sandbox.seed(company)
    sandbox.seed(company)

    states = list(Case.objects.filter(company=company).values_list("state", flat=True))
    assert len(states) == len(sandbox.CASES)
    assert {S.OPEN, S.CLOSED} <= set(states)
    assert Case.objects.filter(contact=ana, state=S.CLOSED).exists()


def test_the_demo_sandbox_mails_its_staff_login_about_new_cases_not_seeded_ones(
    celery_publisher, settings, django_capture_on_commit_callbacks
):
    from django.contrib.auth import get_user_model
    from django.core import mail
    from django.core.management import call_command

    celery_publisher(settings.CELERY_BROKER_URL, eager=True)  # tasks in process, as the demo
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_sandbox", "--admin-email", "admin@example.com", stdout=io.StringIO())

    assert get_user_model().objects.get(username="admin").email == "admin@example.com"
    assert mail.outbox == []  # the seeded cases stand for the past
    assert not Case.objects.filter(staff_notified_at__isnull=True).exists()

    company = Company.objects.get(slug="sandbox")
    with django_capture_on_commit_callbacks(execute=True):
        case = services.case_open(
            company=company,
            contact=company.contacts.get(document_number=ANA_DOCUMENT),
            subject="No enciende",
            description="La pantalla se queda en negro.",
        )

    [message] = mail.outbox
    assert message.to == ["admin@example.com"] and case.reference in message.subject
