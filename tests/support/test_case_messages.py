"""Messages to customers about their cases (support.case_messages), in process with Celery
eager: a staff member's public reply and a resolution reach the customer once, by email with
the thread (never an internal note) or by SMS with a short notice, in the company's language;
opt-outs honoured; a customer with no channel keeps the reply and the log says why; a closed
case takes no reply. Through a real worker and mail server: tests/support/test_email_delivery.py.
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.db import IntegrityError
from django.utils import timezone

from config.celery import app
from core.customer_messages import LOST_AFTER, SENDING_STALE_AFTER
from core.errors import ValidationFailed
from core.models import Company, OutboxMessage
from support import case_messages, services
from support.case_messages import case_messages_sweep
from support.models import Case, CaseComment, CaseMessage
from tests import factories
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE
from tests.row_faults import update_refused
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

pytestmark = pytest.mark.django_db

S = Case.State
Status = CaseMessage.Status
Kind = CaseMessage.Kind


@pytest.fixture
def agent(make_staff):
    return make_staff("lucia", first_name="Lucía", email="lucia@sol.example")


@pytest.fixture
def sent(sms_outbox, django_capture_on_commit_callbacks):
    """Run what the services publish after their commit (tasks run eagerly in the tests)."""

    def run(write):
        with django_capture_on_commit_callbacks(execute=True):
            return write()

    return run


@pytest.fixture
def reply(agent, sent):
    def reply(case: Case, body: str, *, public: bool = True) -> CaseComment:
        return sent(
            lambda: services.case_comment_add(
                case=case, body=body, author_user=agent, public=public
            )
        )

    return reply


def customer_mail(address: str = ANA_EMAIL) -> list:
    return [m for m in mail.outbox if m.to == [address]]


def test_a_public_reply_emails_the_customer_the_thread_without_internal_notes(
    make_case, ana, reply, sent, company
):
    case = make_case(S.IN_PROGRESS, description="La lavadora hace ruido al centrifugar.")
    sent(lambda: services.case_comment_add(case=case, body="Sigue igual.", author_contact=ana))
    reply(case, "Llamar al técnico de zona antes de contestar.", public=False)

    comment = reply(case, "Le enviamos un técnico el jueves.")

    (email,) = customer_mail()
    assert email.subject == f"{company.name}: respuesta a su caso {case.reference}"
    body = email.body
    assert body.startswith("Hola, Ana:")
    thread = [
        "La lavadora hace ruido al centrifugar.",
        "Sigue igual.",
        "Le enviamos un técnico el jueves.",
    ]
    assert [body.index(text) for text in thread] == sorted(body.index(text) for text in thread)
    assert f"Lucía ({company.name})" in body and "-- Usted," in body
    assert "técnico de zona" not in body  # the internal note
    assert "Estado: en curso." in body
    assert f"indicando la referencia {case.reference}" in body
    message = CaseMessage.objects.get()
    assert (message.kind, message.channel, message.status, message.comment) == (
        Kind.REPLY,
        "email",
        Status.SENT,
        comment,
    )
    assert message.masked_destination == "a***@example.com"
    assert message.attempts == 1 and message.sent_at is not None


def test_an_internal_note_reaches_no_one_and_is_not_in_the_log(make_case, reply, sms_outbox):
    case = make_case(S.IN_PROGRESS)

    reply(case, "Revisar la garantía.", public=False)

    assert customer_mail() == [] and sms_outbox == []
    assert not CaseMessage.objects.exists()


def test_a_customer_without_email_gets_a_short_sms_with_the_reference(
    make_case, company, reply, sms_outbox
):
    carla = factories.contact(company, first_name="Carla", phone=ANA_PHONE.replace("1", "4"))
    case = make_case(S.IN_PROGRESS, for_contact=carla)

    reply(case, "Su pieza ha llegado; puede pasar a recogerla.")

    (sms,) = sms_outbox
    assert sms.to == carla.phone
    assert sms.body == (
        f"{company.name}: le hemos respondido en su caso {case.reference}. Para leer la "
        "respuesta o contestar, escriba a nuestro asistente con esa referencia."
    )
    assert "pieza" not in sms.body  # a lock screen shows it: the reply stays in the thread
    message = CaseMessage.objects.get()
    assert (message.channel, message.status) == ("sms", Status.SENT)
    assert message.masked_destination.endswith(carla.phone[-2:])


def test_a_resolution_tells_the_customer_with_the_thread_and_the_auto_close_period(
    make_case, agent, sent, company
):
    case = make_case(S.IN_PROGRESS)

    sent(lambda: services.case_resolve(case=case, by=agent))

    (email,) = customer_mail()
    assert email.subject == f"{company.name}: su caso {case.reference} está resuelto"
    assert f"hemos resuelto su caso {case.reference}" in email.body
    assert "Estado: resuelto." in email.body
    assert "el caso se cerrará en 7 días" in email.body
    message = CaseMessage.objects.get()
    assert (message.kind, message.comment, message.status) == (Kind.RESOLVED, None, Status.SENT)


def test_the_resolution_sms_names_the_reference_and_the_period(
    make_case, company, agent, sent, sms_outbox
):
    ana_by_phone = factories.contact(company, first_name="Eva", phone="+34600999888")
    case = make_case(S.IN_PROGRESS, for_contact=ana_by_phone)

    sent(lambda: services.case_resolve(case=case, by=agent))

    (sms,) = sms_outbox
    assert sms.body == (
        f"{company.name}: hemos resuelto su caso {case.reference}. Si el problema sigue, "
        "díganoslo a través de nuestro asistente; si no, el caso se cerrará en 7 días."
    )


def test_an_english_company_writes_in_english(make_company, make_staff, sent, sms_outbox):
    shop = make_company(name="Sun Shop", language="en")
    eve = factories.contact(shop, first_name="Eve", email="eve@example.com")
    case = services.case_open(company=shop, contact=eve, subject="Broken", description="It broke.")
    lucy = make_staff("lucy", shop, first_name="Lucy")
    services.case_start(case=case)

    sent(lambda: services.case_comment_add(case=case, body="On its way.", author_user=lucy))
    sent(lambda: services.case_resolve(case=case, by=lucy))

    reply_mail, resolved_mail = customer_mail("eve@example.com")
    assert reply_mail.subject == f"Sun Shop: reply on your case {case.reference}"
    assert reply_mail.body.startswith("Hello Eve,")
    assert "-- You," in reply_mail.body and "Lucy (Sun Shop)" in reply_mail.body
    assert "State: in progress." in reply_mail.body
    assert resolved_mail.subject == f"Sun Shop: your case {case.reference} is resolved"
    assert "the case will be closed in 7 days" in resolved_mail.body


def test_an_email_opt_out_sends_by_sms_and_both_opt_outs_send_nothing(
    make_case, ana, reply, sms_outbox
):
    case = make_case(S.IN_PROGRESS)
    ana.email_opt_out = True
    ana.save(update_fields=["email_opt_out"])
    reply(case, "Primera respuesta.")
    ana.sms_opt_out = True
    ana.save(update_fields=["sms_opt_out"])
    reply(case, "Segunda respuesta.")

    assert customer_mail() == []
    assert len(sms_outbox) == 1
    first, second = CaseMessage.objects.order_by("pk")
    assert (first.channel, first.status) == ("sms", Status.SENT)
    assert (second.channel, second.status, second.error) == ("", Status.NOT_SENT, "opted out")


def test_an_opt_out_after_the_reply_was_written_stops_it_at_the_claim(
    make_case, ana, agent, django_capture_on_commit_callbacks
):
    case = make_case(S.IN_PROGRESS)
    with django_capture_on_commit_callbacks(execute=False) as published:
        services.case_comment_add(case=case, body="Hola.", author_user=agent)
    ana.email_opt_out = True
    ana.save(update_fields=["email_opt_out"])

    for publish in published:
        publish()

    assert customer_mail() == []
    message = CaseMessage.objects.get()
    assert (message.status, message.error) == (Status.NOT_SENT, "opted out")


def test_a_contact_without_email_or_phone_keeps_the_reply_and_the_log_says_why(
    make_case, company, reply
):
    walk_in = factories.contact(company, first_name="Pedro")
    case = make_case(S.IN_PROGRESS, for_contact=walk_in)

    comment = reply(case, "Le esperamos en tienda.")

    assert CaseComment.objects.filter(pk=comment.pk, public=True).exists()
    message = comment.customer_message
    assert (message.status, message.channel, message.error) == (
        Status.NOT_SENT,
        "",
        "no phone or email",
    )
    assert case_messages.reason_shown(message.error) == "el cliente no tiene teléfono ni correo"
    assert mail.outbox == []


def test_a_reply_on_a_closed_case_is_refused_with_its_state_and_sends_nothing(
    make_case, agent, sms_outbox
):
    case = make_case(S.CLOSED)

    with pytest.raises(ValidationFailed) as refused:
        services.case_comment_add(case=case, body="¿Algo más?", author_user=agent)

    assert refused.value.code == "case_closed"
    assert refused.value.extras["state"] == "closed"
    assert not CaseComment.objects.filter(case=case).exists()
    assert not CaseMessage.objects.filter(kind=Kind.REPLY).exists()


def test_a_message_is_sent_once_however_many_times_its_task_runs(make_case, reply):
    case = make_case(S.IN_PROGRESS)
    comment = reply(case, "Respuesta.")
    message_id = comment.customer_message.pk

    again = [
        case_messages.case_message_deliver(message_id=message_id, last_try=False) for _ in "ab"
    ]

    assert again == ["skipped", "skipped"]
    assert len(customer_mail()) == 1
    assert CaseMessage.objects.get(pk=message_id).attempts == 1


def test_a_mail_server_busy_once_is_retried_and_sends_once(
    make_case, reply, smtp_refusing, settings
):
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    server = smtp_refusing("451 4.3.0 try again later", times=1)
    case = make_case(S.IN_PROGRESS)

    reply(case, "Respuesta tras un reintento.")

    [(recipients, email)] = server.messages
    assert recipients == [ANA_EMAIL] and case.reference in email["Subject"]
    message = CaseMessage.objects.get()
    assert (message.status, message.attempts, message.error) == (Status.SENT, 2, "")


def test_a_mailbox_refused_for_good_is_failed_with_the_reason_and_not_retried(
    make_case, reply, smtp_refusing
):
    server = smtp_refusing("550 5.1.1 no such mailbox")
    case = make_case(S.IN_PROGRESS)

    comment = reply(case, "Respuesta.")

    assert CaseComment.objects.filter(pk=comment.pk).exists()  # the reply is kept
    message = CaseMessage.objects.get()
    assert (message.status, message.attempts) == (Status.FAILED, 1)
    assert message.error == "SMTP recipient refused 550"
    assert server.rcpt_attempts == 1


def test_a_resolution_notice_not_yet_sent_when_the_case_is_reopened_is_dropped(
    make_case, agent, django_capture_on_commit_callbacks
):
    case = make_case(S.IN_PROGRESS)
    with django_capture_on_commit_callbacks(execute=False) as published:
        services.case_resolve(case=case, by=agent)
    services.case_reopen(case=case, by=agent)

    for publish in published:
        publish()

    assert customer_mail() == []
    message = CaseMessage.objects.get()
    assert (message.status, message.error) == (Status.NOT_SENT, "case reopened")


def test_a_sandbox_companys_messages_stay_in_its_outbox(make_company, make_staff, sent):
    sandbox = make_company(name="Pruebas", environment=Company.Environment.SANDBOX)
    eve = factories.contact(sandbox, first_name="Eva", email="eva@example.com")
    case = services.case_open(company=sandbox, contact=eve, subject="Prueba", description="x")
    tester = make_staff("tester", sandbox)

    sent(lambda: services.case_comment_add(case=case, body="Respuesta.", author_user=tester))

    assert mail.outbox == []
    (kept,) = OutboxMessage.objects.filter(company=sandbox)
    assert kept.destination == "eva@example.com" and case.reference in kept.subject
    assert CaseMessage.objects.get().provider_message_id == f"outbox-{kept.pk}"


def test_the_customers_answer_through_the_agent_joins_the_thread_of_the_next_reply(
    company, ana, ana_conv, make_case, reply, django_capture_on_commit_callbacks
):
    case = make_case(S.IN_PROGRESS)
    reply(case, "¿Nos confirma el número de serie?")

    def call(name: str, arguments: dict, key: str | None = None):
        meta = CallMeta(conversation_id=ana_conv.external_id, idempotency_key=key)
        with django_capture_on_commit_callbacks(execute=True):
            result = call_tool(
                registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
            )
        assert result.is_error is False, result.body
        return result.body

    call("list_my_cases", {"identifier": ANA_DOCUMENT})
    call(
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": case.reference, "message": "Es el SN-4471."},
        key="comment-1",
    )
    reply(case, "Gracias, pedimos la pieza.")

    answer = CaseComment.objects.get(author_contact=ana)
    assert answer.public and answer.case == case
    first, second = customer_mail()
    assert "SN-4471" not in first.body
    body = second.body
    assert body.index("¿Nos confirma") < body.index("Es el SN-4471.") < body.index("pedimos")
    assert CaseMessage.objects.filter(case=case, kind=Kind.REPLY).count() == 2


def test_the_sweep_publishes_a_message_lost_with_the_broker_once(make_case, agent, sent):
    case = make_case(S.IN_PROGRESS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(case_messages, "publish", lambda message_id: None)  # the broker is down
        comment = sent(
            lambda: services.case_comment_add(case=case, body="Hola.", author_user=agent)
        )
    message = comment.customer_message
    assert CaseMessage.objects.get(pk=message.pk).status == Status.QUEUED
    later = timezone.now() + LOST_AFTER + timedelta(seconds=1)

    assert case_messages_sweep(now=timezone.now()).queued == 0  # not lost yet
    assert case_messages_sweep(now=later).queued == 1

    assert len(customer_mail()) == 1
    assert CaseMessage.objects.get(pk=message.pk).status == Status.SENT
    assert case_messages_sweep(now=later + LOST_AFTER).queued == 0
    assert len(customer_mail()) == 1


def test_the_sweep_settles_a_message_whose_worker_stopped_while_sending(make_case, agent):
    case = make_case(S.IN_PROGRESS)
    comment = services.case_comment_add(case=case, body="Hola.", author_user=agent)
    stopped_at = timezone.now() - SENDING_STALE_AFTER - timedelta(seconds=1)
    CaseMessage.objects.filter(pk=comment.customer_message.pk).update(
        status=Status.SENDING, claimed_at=stopped_at
    )

    result = case_messages_sweep()

    assert (result.settled, result.failed) == (1, 0)
    message = CaseMessage.objects.get()
    assert (message.status, message.error) == (Status.UNKNOWN, "stopped while sending")
    assert case_messages.case_message_deliver(message_id=message.pk, last_try=False) == "skipped"
    assert mail.outbox == []


@pytest.mark.postgres
def test_one_message_that_fails_to_settle_leaves_the_others_settled(make_case, agent):
    case = make_case(S.IN_PROGRESS)
    stopped_at = timezone.now() - SENDING_STALE_AFTER - timedelta(seconds=1)
    failing, other = (
        services.case_comment_add(case=case, body=text, author_user=agent).customer_message
        for text in ("Uno.", "Dos.")
    )
    CaseMessage.objects.update(status=Status.SENDING, claimed_at=stopped_at)

    with update_refused(failing):
        result = case_messages_sweep()

    assert (result.settled, result.failed) == (1, 1)
    assert CaseMessage.objects.get(pk=other.pk).status == Status.UNKNOWN
    assert CaseMessage.objects.get(pk=failing.pk).status == Status.SENDING  # due next run


def test_the_sweep_is_on_the_beat_schedule():
    app.loader.import_default_modules()
    app.finalize()
    tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert "support.tasks.case_messages_resend" in tasks


def test_a_reply_refused_by_the_database_writes_no_message(make_case, agent, monkeypatch):
    """The message is written in the reply's transaction: one fails, neither is kept."""
    case = make_case(S.IN_PROGRESS)

    def refuse(*args, **kwargs):
        raise IntegrityError("refused")

    monkeypatch.setattr(CaseMessage.objects, "create", refuse)
    with pytest.raises(IntegrityError):
        services.case_comment_add(case=case, body="Hola.", author_user=agent)

    assert not CaseComment.objects.filter(case=case).exists()


def test_a_resolution_through_the_integration_api_tells_the_customer_once(
    company, make_case, sms_outbox, django_capture_on_commit_callbacks
):
    from rest_framework.test import APIClient

    from integration.models import IntegrationCredential
    from integration.services import integration_credential_issue

    case = make_case(S.IN_PROGRESS)
    _credential, token = integration_credential_issue(
        company=company, name="ERP", scope=IntegrationCredential.Scope.READ_WRITE
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    url = f"/api/v1/cases/{case.reference}/resolve"

    with django_capture_on_commit_callbacks(execute=True):
        first = api.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="resolve-1")
    with django_capture_on_commit_callbacks(execute=True):
        replay = api.post(url, {}, format="json", HTTP_IDEMPOTENCY_KEY="resolve-1")

    assert first.status_code == replay.status_code == 200, first.content
    assert replay.headers.get("X-Idempotency-Replayed") == "true"
    (email,) = customer_mail()
    assert email.subject == f"{company.name}: su caso {case.reference} está resuelto"
    assert list(CaseMessage.objects.values_list("kind", "status")) == [(Kind.RESOLVED, Status.SENT)]


# The resolution's note and the close by staff (issue 43) ------------------------------------------


def test_a_resolution_note_is_told_to_the_customer_and_kept_in_the_history(make_case, sent):
    case = make_case(S.IN_PROGRESS)

    sent(lambda: services.case_resolve(case=case, reason="Le cambiamos la bomba de agua"))

    (email,) = customer_mail()
    assert "Resolución: Le cambiamos la bomba de agua." in email.body
    (message,) = CaseMessage.objects.filter(case=case)
    assert (message.kind, message.reason, message.status) == (
        Kind.RESOLVED,
        "Le cambiamos la bomba de agua",
        Status.SENT,
    )


def test_staff_closing_a_case_tell_the_customer_the_reason_once(make_case, sent):
    case = make_case(S.RESOLVED)
    mail.outbox.clear()

    sent(lambda: services.case_close(case=case, reason="Sin respuesta del cliente"))
    with pytest.raises(ValidationFailed):
        services.case_close(case=case, reason="otra vez")  # closed is terminal: nothing more

    (email,) = customer_mail()
    assert email.subject == f"Peluquería Sol: su caso {case.reference} está cerrado"
    assert "Motivo: Sin respuesta del cliente." in email.body
    assert "abriremos un caso nuevo" in email.body
    (message,) = CaseMessage.objects.filter(case=case, kind=Kind.CLOSED)
    assert message.status == Status.SENT
    assert case_messages.case_message_deliver(message_id=message.pk, last_try=False) == "skipped"
    assert len(customer_mail()) == 1


def test_a_close_is_texted_to_a_customer_with_only_a_phone(make_case, company, sent, sms_outbox):
    from core.services import contact_create

    eva = contact_create(company=company, first_name="Eva", phone="+34600999111")
    case = make_case(S.RESOLVED, for_contact=eva)
    sms_outbox.clear()

    sent(lambda: services.case_close(case=case, reason="Duplicado de otro caso"))

    (sms,) = sms_outbox
    assert f"hemos cerrado su caso {case.reference}" in sms.body
    assert "Motivo: Duplicado de otro caso." in sms.body


def test_the_customer_closing_it_and_the_silent_auto_close_send_nothing(make_case, ana, sent):
    confirmed = make_case(S.RESOLVED)
    silent = make_case(S.RESOLVED)
    Case.objects.filter(pk=silent.pk).update(resolved_at=timezone.now() - timedelta(days=30))

    sent(lambda: services.case_close(case=confirmed, contact=ana))
    assert services.case_close_if_unanswered(case_id=silent.pk) is True

    assert not CaseMessage.objects.filter(kind=Kind.CLOSED).exists()


def test_a_close_for_a_customer_who_opted_out_everywhere_is_kept_not_sent(make_case, ana, sent):
    case = make_case(S.RESOLVED)
    ana.email_opt_out = ana.sms_opt_out = True
    ana.save(update_fields=["email_opt_out", "sms_opt_out"])

    closed = sent(lambda: services.case_close(case=case, reason="Resuelto"))

    assert closed.state == S.CLOSED
    (message,) = CaseMessage.objects.filter(case=case, kind=Kind.CLOSED)
    assert (message.status, message.error) == (Status.NOT_SENT, "opted out")
