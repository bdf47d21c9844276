"""Support's background work: staff emails after commit, and closing silent resolved cases."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from support import services, tasks
from support.models import Case, SupportSettings

pytestmark = pytest.mark.django_db
S = Case.State


def test_staff_are_emailed_about_a_new_case_only_once_it_is_committed(
    company, other_company, contact, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")
    make_staff("sin-correo")
    make_staff("otro", email="otro@luna.example", of=other_company)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        case = services.case_open(
            company=company,
            contact=contact,
            subject="La lavadora no centrifuga",
            description="Hace ruido desde el lunes.",
        )
        assert mail.outbox == []

    assert len(callbacks) == 1
    [message] = mail.outbox
    assert message.to == ["marta@sol.example"]
    assert case.reference in message.subject
    assert "La lavadora no centrifuga" in message.subject
    assert "Hace ruido desde el lunes." in message.body
    assert "Ana García" in message.body


def test_a_rolled_back_case_emails_nobody(company, contact, make_staff):
    make_staff("marta", email="marta@sol.example")

    # Outside a captured commit, on_commit callbacks of a test transaction never run.
    services.case_open(company=company, contact=contact, subject="S", description="d")

    assert mail.outbox == []


def test_the_assignee_alone_hears_about_a_customer_comment_and_internal_notes_stay_out(
    make_case, contact, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")
    luis = make_staff("luis", email="luis@sol.example")
    case = make_case(S.WAITING_CUSTOMER)
    case = services.case_update(
        case=case, priority="normal", assignee=luis, internal_notes="Cliente difícil"
    )

    with django_capture_on_commit_callbacks(execute=True):
        services.case_comment_add(case=case, body="Nota interna", author_user=luis, public=False)
    assert mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        services.case_comment_add(case=case, body="Es el modelo X200", author_contact=contact)

    [message] = mail.outbox
    assert message.to == ["luis@sol.example"]
    assert "Es el modelo X200" in message.body
    assert "Cliente difícil" not in message.body


def test_a_customer_subject_with_a_line_break_still_makes_a_valid_email(
    company, contact, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")

    with django_capture_on_commit_callbacks(execute=True):
        services.case_open(company=company, contact=contact, subject="A\nB", description="d")

    assert "\n" not in mail.outbox[0].subject


def _resolve_days_ago(case: Case, days: float) -> Case:
    case = services.case_resolve(case=case)
    Case.objects.filter(pk=case.pk).update(resolved_at=timezone.now() - timedelta(days=days))
    case.refresh_from_db()
    return case


def test_a_resolved_case_nobody_answers_closes_after_the_companys_days(make_case, company):
    SupportSettings.objects.create(company=company, auto_close_after_days=3)
    stale = _resolve_days_ago(make_case(S.IN_PROGRESS), 3.1)
    recent = _resolve_days_ago(make_case(S.IN_PROGRESS), 2.9)
    working = make_case(S.IN_PROGRESS)

    assert tasks.cases_auto_close.delay().get() == 1

    states = dict(Case.objects.values_list("pk", "state"))
    assert states[stale.pk] == S.CLOSED
    assert states[recent.pk] == S.RESOLVED
    assert states[working.pk] == S.IN_PROGRESS


def test_without_settings_the_default_period_applies(make_case):
    days = SupportSettings.DEFAULT_AUTO_CLOSE_DAYS
    stale = _resolve_days_ago(make_case(S.IN_PROGRESS), days + 0.1)
    recent = _resolve_days_ago(make_case(S.IN_PROGRESS), days - 0.1)

    tasks.cases_auto_close()

    stale.refresh_from_db()
    recent.refresh_from_db()
    assert (stale.state, recent.state) == (S.CLOSED, S.RESOLVED)


def test_a_resolved_case_the_customer_answered_is_not_closed_automatically(make_case, contact):
    case = _resolve_days_ago(make_case(S.IN_PROGRESS), 30)
    services.case_comment_add(case=case, body="¿Y la factura?", author_contact=contact)

    tasks.cases_auto_close()

    case.refresh_from_db()
    assert case.state == S.RESOLVED


def test_each_company_has_its_own_period(make_case, company):
    SupportSettings.objects.create(company=company, auto_close_after_days=30)
    case = _resolve_days_ago(make_case(S.IN_PROGRESS), 10)

    tasks.cases_auto_close()

    case.refresh_from_db()
    assert case.state == S.RESOLVED


def test_the_sweep_is_registered_with_beat_from_the_support_app():
    from core.celery import app

    app.loader.import_default_modules()
    app.finalize()
    schedule = app.conf.beat_schedule
    assert any(e["task"] == "support.tasks.cases_auto_close" for e in schedule.values())
