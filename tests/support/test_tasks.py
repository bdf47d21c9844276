"""Support's background work: staff emails after commit, and closing silent resolved cases."""

import smtplib
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from core.models import StaffMembership
from support import selectors, services, tasks
from support.models import Case, CaseComment, SupportSettings
from tests.row_faults import update_refused
from tests.servers import at_once, free_port, start_smtp

pytestmark = pytest.mark.django_db
S = Case.State


def test_staff_are_emailed_about_a_new_case_only_once_it_is_committed(
    company, other_company, ana, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")
    make_staff("sin-correo")
    make_staff("otro", other_company, email="otro@luna.example")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        case = services.case_open(
            company=company,
            contact=ana,
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


def test_a_rolled_back_case_emails_nobody(company, ana, make_staff):
    make_staff("marta", email="marta@sol.example")

    # Outside a captured commit, on_commit callbacks of a test transaction never run.
    services.case_open(company=company, contact=ana, subject="S", description="d")

    assert mail.outbox == []


def test_the_assignee_alone_hears_about_a_customer_comment_and_internal_notes_stay_out(
    make_case, ana, make_staff, django_capture_on_commit_callbacks
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
        services.case_comment_add(case=case, body="Es el modelo X200", author_contact=ana)

    [message] = mail.outbox
    assert message.to == ["luis@sol.example"]
    assert "Es el modelo X200" in message.body
    assert "Cliente difícil" not in message.body


def test_an_assignee_who_left_the_company_hears_nothing_more_and_its_staff_do(
    make_case, ana, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")
    luis = make_staff("luis", email="luis@sol.example")
    case = services.case_update(
        case=make_case(S.IN_PROGRESS), priority="normal", assignee=luis, internal_notes=""
    )
    StaffMembership.objects.filter(user=luis).delete()  # he left; the case still names him

    with django_capture_on_commit_callbacks(execute=True):
        services.case_comment_add(case=case, body="Mi tarjeta es 4111...", author_contact=ana)

    [message] = mail.outbox
    assert message.recipients() == ["marta@sol.example"]


def test_an_assignee_now_staff_of_another_company_only_hears_nothing_more(
    make_case, other_company, make_staff
):
    make_staff("marta", email="marta@sol.example")
    luis = make_staff("luis", email="luis@sol.example")
    case = services.case_update(
        case=make_case(S.IN_PROGRESS), priority="normal", assignee=luis, internal_notes=""
    )
    StaffMembership.objects.filter(user=luis).update(company=other_company)

    assert selectors.case_staff_recipients(case=case) == ["marta@sol.example"]


def test_an_inactive_assignee_hears_nothing_and_the_staff_do(make_case, make_staff):
    make_staff("marta", email="marta@sol.example")
    luis = make_staff("luis", email="luis@sol.example")
    case = services.case_update(
        case=make_case(S.IN_PROGRESS), priority="normal", assignee=luis, internal_notes=""
    )
    type(luis).objects.filter(pk=luis.pk).update(is_active=False)

    assert selectors.case_staff_recipients(case=case) == ["marta@sol.example"]


def test_staff_emailed_together_do_not_see_each_others_addresses(
    company, ana, make_staff, smtp_refusing, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")
    make_staff("luis", email="luis@sol.example")
    server = smtp_refusing()  # accepts everything

    with django_capture_on_commit_callbacks(execute=True):
        services.case_open(company=company, contact=ana, subject="Sin luz", description="d")

    [(envelope, message)] = server.messages  # one message: it reaches all or, failing, none
    assert sorted(envelope) == ["luis@sol.example", "marta@sol.example"]
    assert message["To"] == "undisclosed-recipients:;"
    headers = "\n".join(f"{name}: {value}" for name, value in message.items())
    assert "marta@" not in headers and "luis@" not in headers


def test_a_customer_subject_with_a_line_break_still_makes_a_valid_email(
    company, ana, make_staff, django_capture_on_commit_callbacks
):
    make_staff("marta", email="marta@sol.example")

    with django_capture_on_commit_callbacks(execute=True):
        services.case_open(company=company, contact=ana, subject="A\nB", description="d")

    assert "\n" not in mail.outbox[0].subject


def _written_minutes_ago(record: Case | CaseComment, minutes: float) -> None:
    type(record).objects.filter(pk=record.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )


def test_a_staff_email_lost_with_the_broker_is_sent_once_by_the_sweep(
    company,
    ana,
    make_staff,
    celery_publisher,
    django_capture_on_commit_callbacks,
    caplog,
    settings,
):
    make_staff("marta", email="marta@sol.example")
    celery_publisher(f"redis://127.0.0.1:{free_port()}/0")  # the broker is down: nothing listens

    with django_capture_on_commit_callbacks(execute=True):
        case = services.case_open(
            company=company, contact=ana, subject="Sin luz", description="Desde ayer."
        )

    # The customer's case stands (the failed publish is only logged), and its notice waits.
    assert "Error calling _notify_staff_on_commit.<locals>.notify" in caplog.text
    assert mail.outbox == []
    case.refresh_from_db()
    assert case.staff_notified_at is None

    # The broker is back; the sweep finds the notice once its grace period has passed.
    celery_publisher(settings.CELERY_BROKER_URL, eager=True)  # in process, as in other tests
    assert tasks.case_staff_notices_resend() == 0  # too recent: its own task may still run
    _written_minutes_ago(case, 20)
    assert tasks.case_staff_notices_resend() == 1

    [message] = mail.outbox
    assert message.to == ["marta@sol.example"] and case.reference in message.subject
    case.refresh_from_db()
    assert case.staff_notified_at is not None
    # Settled: neither another sweep nor a late duplicate of its task sends it again.
    assert tasks.case_staff_notices_resend() == 0
    assert services.case_staff_notify(case_id=case.pk) == 0
    assert len(mail.outbox) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_deliveries_of_one_notice_at_once_send_one_email(make_case, make_staff, settings):
    make_staff("marta", email="marta@sol.example")
    case = make_case(S.OPEN)
    # As if its task had waited in the queue past the grace period: the sweep publishes it
    # again, and the two copies reach two workers together.
    Case.objects.filter(pk=case.pk).update(staff_notified_at=None)

    with start_smtp(delay=0.5) as (host, port, inbox):  # a mail server slow to accept
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        sent = at_once(*[lambda: services.case_staff_notify(case_id=case.pk)] * 2)

    assert sorted(sent) == [0, 1]
    assert len(inbox.messages) == 1
    case.refresh_from_db()
    assert case.staff_notified_at is not None


def test_the_sweep_resends_only_unsent_notices_of_the_last_day(ana, make_case, make_staff):
    staff = make_staff("marta", email="marta@sol.example")
    # Opened in the test's transaction, which never commits: no notice goes out by itself.
    lost, recent, stale, sent = (make_case(S.IN_PROGRESS) for _ in range(4))
    assert services.case_staff_notify(case_id=sent.pk) == 1
    customer = services.case_comment_add(case=lost, body="¿Hay novedades?", author_contact=ana)
    internal = services.case_comment_add(case=lost, body="Nota", author_user=staff, public=False)
    for record, minutes in (
        (lost, 20),
        (recent, 5),
        (stale, 60 * 24 + 5),
        (sent, 20),
        (customer, 30),
        (internal, 30),
    ):
        _written_minutes_ago(record, minutes)

    pending = selectors.case_staff_notices_pending(now=timezone.now())

    assert pending == [(lost.pk, None), (lost.pk, customer.pk)]


def test_a_notice_nobody_can_receive_is_settled_without_an_email(make_case):
    case = make_case(S.OPEN)  # nobody on the company's staff has an email address

    assert services.case_staff_notify(case_id=case.pk) == 0

    case.refresh_from_db()
    assert case.staff_notified_at is not None
    _written_minutes_ago(case, 20)
    assert selectors.case_staff_notices_pending(now=timezone.now()) == []


def test_a_notice_refused_for_good_is_settled_after_one_try_and_not_swept_again(
    make_case, make_staff, smtp_refusing, caplog
):
    make_staff("marta", email="gone@sol.example")
    case = make_case(S.OPEN)  # in the test's transaction: its own notice never ran
    server = smtp_refusing("550 5.1.1 No such user")

    assert tasks.case_notify_staff.apply(kwargs={"case_id": case.pk}).get() == 0

    assert server.rcpt_attempts == 1 and server.messages == []
    assert "staff email refused for good (SMTP recipient refused 550)" in caplog.text
    case.refresh_from_db()
    assert case.staff_notified_at is not None
    assert case.staff_notice_error == "SMTP recipient refused 550"  # what staff see on the case
    assert case.staff_notice_error == "SMTP recipient refused 550"  # what staff see on the case
    _written_minutes_ago(case, 20)
    assert selectors.case_staff_notices_pending(now=timezone.now()) == []


def test_a_notice_refused_for_now_stays_pending_for_a_retry(make_case, make_staff, smtp_refusing):
    """451 greylisting, 452 mailbox full: the task retries it (OSError is in its
    autoretry_for), and past its retries the sweep still finds it."""
    make_staff("marta", email="marta@sol.example")
    case = make_case(S.OPEN)
    server = smtp_refusing("451 4.7.1 Greylisted, please try again later", times=1)

    with pytest.raises(smtplib.SMTPRecipientsRefused):
        services.case_staff_notify(case_id=case.pk)
    case.refresh_from_db()
    assert case.staff_notified_at is None
    _written_minutes_ago(case, 20)
    assert selectors.case_staff_notices_pending(now=timezone.now()) == [(case.pk, None)]

    assert services.case_staff_notify(case_id=case.pk) == 1  # the retry
    assert [envelope for envelope, _message in server.messages] == [["marta@sol.example"]]
    assert issubclass(smtplib.SMTPRecipientsRefused, tasks.case_notify_staff.autoretry_for)


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


def test_a_resolved_case_the_customer_answered_is_not_closed_automatically(make_case, ana):
    case = _resolve_days_ago(make_case(S.IN_PROGRESS), 30)
    services.case_comment_add(case=case, body="¿Y la factura?", author_contact=ana)

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
    from config.celery import app

    app.loader.import_default_modules()
    app.finalize()
    schedule = app.conf.beat_schedule
    assert any(e["task"] == "support.tasks.cases_auto_close" for e in schedule.values())
    assert any(e["task"] == "support.tasks.case_staff_notices_resend" for e in schedule.values())


@pytest.mark.postgres
def test_one_case_that_fails_to_close_leaves_the_others_closed_and_stays_due(make_case):
    days = SupportSettings.DEFAULT_AUTO_CLOSE_DAYS + 1
    failing = _resolve_days_ago(make_case(S.IN_PROGRESS), days)
    other = _resolve_days_ago(make_case(S.IN_PROGRESS), days)

    with update_refused(failing):
        assert tasks.cases_auto_close() == 1

    states = dict(Case.objects.values_list("pk", "state"))
    assert (states[failing.pk], states[other.pk]) == (S.RESOLVED, S.CLOSED)
    assert tasks.cases_auto_close() == 1  # the next run closes it
    failing.refresh_from_db()
    assert failing.state == S.CLOSED
