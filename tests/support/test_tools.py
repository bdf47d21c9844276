"""Support tools over real HTTP (the REST mirror of a live server), as the Gateway calls them."""

import json
import uuid

import pytest
from django.core import mail

from support import services
from support.models import Case, CaseComment
from tests.factories import ANA_DOCUMENT, ANA_EMAIL
from tooling.context import CallMeta, ToolContext
from tooling.ledger import LedgerEntry, ledger_record
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)
S = Case.State


def key() -> str:
    return f"k-{uuid.uuid4().hex}"


def write(client, name: str, arguments: dict, idempotency_key: str | None = None):
    return client.call(name, arguments, key=idempotency_key or key())


def seen_case(client, state: str, make_case) -> Case:
    """A case of Ana in `state`, which the conversation has been shown by list_my_cases."""
    case = make_case(state)
    assert client.call("list_my_cases", {"identifier": ANA_DOCUMENT}).status_code == 200
    return case


def test_an_empty_list_of_cases_is_a_success(ana_client):
    response = ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT})

    assert response.status_code == 200
    assert response.json() == {"items": [], "count": 0, "has_more": False, "next_cursor": None}


def test_the_list_shows_only_the_customers_own_cases_with_public_fields(
    ana_client, make_case, bruno
):
    mine = make_case(S.WAITING_CUSTOMER, subject="Lavadora")
    theirs = make_case(S.OPEN, for_contact=bruno, subject="Ajeno")

    response = ana_client.call("list_my_cases", {"identifier": ANA_EMAIL})

    body = response.json()
    assert [item["reference"] for item in body["items"]] == [mine.reference]
    [item] = body["items"]
    assert set(item) == {
        "reference",
        "subject",
        "state",
        "state_label",
        "opened_at",
        "updated_at",
    }
    assert (item["state"], item["state_label"]) == (
        "waiting_customer",
        "pendiente de su respuesta",
    )
    assert theirs.reference not in response.text


def test_the_list_filters_by_state_and_honours_the_limit(ana_client, make_case):
    for _ in range(3):
        make_case(S.OPEN)
    closed = make_case(S.CLOSED)

    closed_only = ana_client.call(
        "list_my_cases", {"identifier": ANA_DOCUMENT, "state": "closed"}
    ).json()
    limited = ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT, "limit": 2}).json()

    assert [i["reference"] for i in closed_only["items"]] == [closed.reference]
    assert (limited["count"], limited["has_more"]) == (2, True)


def test_the_list_continues_from_its_cursor_each_case_once_newest_first(ana_client, make_case):
    cases = [make_case(S.OPEN) for _ in range(25)]
    newest_first = [case.reference for case in reversed(cases)]

    seen, cursor, answers = [], None, 0
    while True:
        arguments = {"identifier": ANA_DOCUMENT, "limit": 10} | (
            {"cursor": cursor} if cursor else {}
        )
        body = ana_client.call("list_my_cases", arguments).json()
        answers += 1
        seen += [item["reference"] for item in body["items"]]
        cursor = body["next_cursor"]
        assert (cursor is None) == (body["has_more"] is False)
        if cursor is None:
            break

    assert (seen, answers) == (newest_first, 3)


def test_a_list_cut_by_the_output_cap_continues_after_its_last_shown_item(ana_client, make_case):
    cases = [
        make_case(S.IN_PROGRESS, subject=f"{n} " + "La lavadora hace ruido. " * 6)
        for n in range(20)
    ]

    pages = [ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT, "limit": 20}).json()]
    while pages[-1]["next_cursor"] and len(pages) <= len(cases):
        arguments = {"identifier": ANA_DOCUMENT, "limit": 20, "cursor": pages[-1]["next_cursor"]}
        pages.append(ana_client.call("list_my_cases", arguments).json())

    assert pages[0]["truncated"] is True
    # Page after page, every case once, newest first: nothing skipped at the cut.
    shown = [item["reference"] for page in pages for item in page["items"]]
    assert shown == [case.reference for case in reversed(cases)]


@pytest.mark.parametrize("cursor", ["abc", "cDE!", "", "x" * 16, "cC0xMDAwMDAw", "cDEwMDAwMDAx"])
def test_a_cursor_we_did_not_make_is_refused(ana_client, cursor):
    response = ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT, "cursor": cursor})

    assert response.status_code == 422
    assert (response.json()["code"], response.json()["field"]) == ("invalid_cursor", "cursor")


def test_the_state_filter_takes_the_spanish_label_too_and_refuses_unknown_states(
    ana_client, make_case
):
    waiting = make_case(S.WAITING_CUSTOMER)
    make_case(S.OPEN)

    by_label = ana_client.call(
        "list_my_cases", {"identifier": ANA_DOCUMENT, "state": "Pendiente de su respuesta"}
    )
    unknown = ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT, "state": "archivado"})

    assert [i["reference"] for i in by_label.json()["items"]] == [waiting.reference]
    assert (unknown.status_code, unknown.json()["code"]) == (422, "invalid_arguments")
    schema = registry.get("list_my_cases").input_schema["properties"]["state"]
    assert schema["anyOf"][0]["enum"] == [
        "open",
        "in_progress",
        "waiting_customer",
        "resolved",
        "closed",
    ]


def test_get_case_shows_public_messages_and_staff_by_first_name_only(
    ana_client, make_case, make_staff, ana
):
    marta = make_staff("mruiz", email="marta.ruiz@sol.example", first_name="Marta")
    marta.last_name = "Ruizdíaz"
    marta.save()
    case = make_case(S.IN_PROGRESS)
    services.case_update(
        case=case, priority="urgent", assignee=marta, internal_notes="NOTA-INTERNA-123"
    )
    services.case_comment_add(case=case, body="SECRETO-INTERNO", author_user=marta, public=False)
    services.case_comment_add(case=case, body="Le enviamos un técnico.", author_user=marta)
    services.case_comment_add(case=case, body="Gracias", author_contact=ana)

    response = ana_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": case.reference})

    assert response.status_code == 200
    body = response.json()
    assert body["reference"] == case.reference
    assert body["handled_by"] == "Marta"
    assert body["messages"] == [
        {"from": "Marta", "at": body["messages"][0]["at"], "text": "Le enviamos un técnico."},
        {"from": "usted", "at": body["messages"][1]["at"], "text": "Gracias"},
    ]
    for secret in ("SECRETO-INTERNO", "NOTA-INTERNA", "Ruizdíaz", "marta.ruiz", "urgent", "mruiz"):
        assert secret not in response.text
    assert not {"id", "pk", "priority", "internal_notes", "assignee", "contact"} & set(body)


def test_get_case_of_another_customer_is_permission(ana_client, make_case, bruno):
    theirs = make_case(S.OPEN, for_contact=bruno)

    response = ana_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": theirs.reference})

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"
    assert theirs.subject not in response.text


def test_get_case_of_an_unknown_reference_is_not_found(ana_client):
    response = ana_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": "CS-ZZZZZZ"})

    assert response.status_code == 404
    assert response.json()["error_type"] == "NOT_FOUND"


def test_get_case_stays_within_the_output_cap_with_long_texts(ana_client, make_case, ana):
    case = make_case(S.IN_PROGRESS, description="x" * 4000)
    for n in range(12):
        services.case_comment_add(case=case, body=f"{n} " + "y" * 3990, author_contact=ana)

    response = ana_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": case.reference})

    body = response.json()
    assert len(response.text) <= 3000
    assert len(body["messages"]) == 5
    assert body["earlier_messages"] is True
    assert body["messages"][-1]["text"].startswith("11 ")


def test_tools_need_the_conversation_to_be_identified_first(tool_client, make_case):
    response = tool_client.call("list_my_cases", {"identifier": ANA_DOCUMENT})

    assert response.status_code == 403
    assert response.json()["code"] == "identification_required"


def test_open_case_answers_its_reference_and_it_can_be_commented_at_once(ana_client, make_staff):
    make_staff("marta", email="marta@sol.example")

    opened = write(
        ana_client,
        "open_case",
        {
            "identifier": ANA_DOCUMENT,
            "subject": "No enciende",
            "description": "La tele no enciende.",
        },
    )

    assert opened.status_code == 200
    body = opened.json()
    assert body["reference"].startswith("CS-")
    assert (body["state"], body["state_label"], body["related_case"]) == ("open", "abierto", None)
    case = Case.objects.get(reference=body["reference"])
    assert case.channel == Case.Channel.AGENT
    assert case.conversation.external_id == ana_client.conversation_id
    commented = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": body["reference"], "message": "+"},
    )
    assert commented.status_code == 200
    opened_mail, comment_mail = mail.outbox
    assert body["reference"] in opened_mail.subject
    assert opened_mail.to == comment_mail.to == ["marta@sol.example"]


def test_opening_twice_with_the_same_key_opens_one_case_and_emails_once(ana_client, make_staff):
    make_staff("marta", email="marta@sol.example")
    arguments = {"identifier": ANA_DOCUMENT, "subject": "Ruido", "description": "Hace ruido."}
    same = key()

    first = write(ana_client, "open_case", arguments, same)
    second = write(ana_client, "open_case", arguments, same)

    assert first.json() == second.json()
    assert second.headers.get("X-Idempotency-Replayed") == "true"
    assert Case.objects.count() == 1
    assert len(mail.outbox) == 1


def test_a_follow_up_case_links_to_a_closed_case_the_conversation_saw(ana_client, make_case):
    closed = seen_case(ana_client, S.CLOSED, make_case)

    response = write(
        ana_client,
        "open_case",
        {
            "identifier": ANA_DOCUMENT,
            "subject": "Vuelve a fallar",
            "description": "El mismo problema.",
            "related_case": closed.reference[-4:],
        },
    )

    assert response.status_code == 200
    assert response.json()["related_case"] == closed.reference
    assert Case.objects.get(reference=response.json()["reference"]).related_case == closed


def test_a_follow_up_of_a_case_never_shown_is_refused(ana_client, make_case):
    closed = make_case(S.CLOSED)

    response = write(
        ana_client,
        "open_case",
        {
            "identifier": ANA_DOCUMENT,
            "subject": "S",
            "description": "d",
            "related_case": closed.reference,
        },
    )

    assert response.status_code == 422
    assert response.json()["code"] == "reference_not_seen"
    assert Case.objects.count() == 1


def test_a_comment_on_a_closed_case_is_validation_with_the_state(ana_client, make_case):
    closed = seen_case(ana_client, S.CLOSED, make_case)

    response = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": closed.reference, "message": "Hola"},
    )

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["state"], body["state_label"]) == (
        "VALIDATION",
        "closed",
        "cerrado",
    )
    assert "caso nuevo" in body["user_message"]
    assert not CaseComment.objects.exists()


def test_a_comment_on_a_case_never_shown_in_the_conversation_is_validation(ana_client, make_case):
    own_but_unseen = make_case(S.IN_PROGRESS)

    response = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": own_but_unseen.reference, "message": "Hola"},
    )

    assert response.status_code == 422
    assert response.json()["code"] == "reference_not_seen"
    assert not CaseComment.objects.exists()


def test_a_case_the_output_cap_left_out_of_the_list_was_never_shown_and_cannot_be_commented(
    ana_client, make_case
):
    """The cap drops a long listing's tail after the tool built it: the conversation saw only
    what the answer kept, so only that is in its ledger (seed 1 §3.1)."""
    cases = [
        make_case(S.IN_PROGRESS, subject=f"{n} " + "La lavadora hace ruido. " * 6)
        for n in range(20)
    ]

    listed = ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT, "limit": 20}).json()

    assert listed["truncated"] is True and listed["has_more"] is True
    shown = {item["reference"] for item in listed["items"]}
    assert 0 < len(shown) < len(cases)
    hidden = next(case for case in cases if case.reference not in shown)
    refused = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": hidden.reference, "message": "Hola"},
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "reference_not_seen"
    visible = next(case for case in cases if case.reference in shown)
    accepted = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": visible.reference, "message": "Hola"},
    )
    assert accepted.status_code == 200, accepted.text


def test_naming_another_customers_case_never_shown_is_permission(ana_client, make_case, bruno):
    theirs = make_case(S.IN_PROGRESS, for_contact=bruno)

    response = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": theirs.reference, "message": "Hola"},
    )

    assert response.status_code == 403
    assert response.json()["code"] == "not_owner"
    assert not CaseComment.objects.exists()


def test_writing_to_another_customers_case_is_permission_even_if_it_was_seen(
    ana_client, company, make_case, bruno
):
    theirs = make_case(S.RESOLVED, for_contact=bruno)
    # However it got into the ledger, ownership is still checked at the write.
    ctx = ToolContext(company=company, meta=CallMeta(conversation_id=ana_client.conversation_id))
    ledger_record(ctx, "case", [LedgerEntry(theirs.reference)])

    for name, extra in [
        ("add_case_comment", {"message": "x"}),
        ("confirm_case_resolved", {}),
        ("report_case_not_fixed", {"message": "x"}),
    ]:
        response = write(
            ana_client, name, {"identifier": ANA_DOCUMENT, "case": theirs.reference, **extra}
        )
        assert response.status_code == 403, name
        assert response.json()["error_type"] == "PERMISSION"
    theirs.refresh_from_db()
    assert theirs.state == S.RESOLVED
    assert not theirs.comments.exists()


def test_the_customers_answer_by_suffix_moves_a_waiting_case_back_to_work(ana_client, make_case):
    case = seen_case(ana_client, S.WAITING_CUSTOMER, make_case)

    response = write(
        ana_client,
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": case.reference[-3:].lower(), "message": "Modelo X200"},
    )

    assert response.status_code == 200
    assert response.json()["state"] == "in_progress"
    case.refresh_from_db()
    assert case.state == S.IN_PROGRESS


def test_confirming_a_resolved_case_closes_it_and_a_retry_replays_the_success(
    ana_client, make_case
):
    case = seen_case(ana_client, S.RESOLVED, make_case)
    arguments = {"identifier": ANA_DOCUMENT, "case": case.reference}
    same = key()

    first = write(ana_client, "confirm_case_resolved", arguments, same)
    retry = write(ana_client, "confirm_case_resolved", arguments, same)
    again = write(ana_client, "confirm_case_resolved", arguments)

    assert first.status_code == retry.status_code == 200
    assert first.json()["state"] == "closed"
    assert retry.json() == first.json()
    assert again.status_code == 422
    assert again.json()["state"] == "closed"


def test_confirming_a_case_that_is_not_resolved_is_validation_with_its_state(ana_client, make_case):
    case = seen_case(ana_client, S.IN_PROGRESS, make_case)

    response = write(
        ana_client, "confirm_case_resolved", {"identifier": ANA_DOCUMENT, "case": case.reference}
    )

    assert response.status_code == 422
    assert (response.json()["state"], response.json()["state_label"]) == ("in_progress", "en curso")
    assert "está en curso" in response.json()["user_message"]
    case.refresh_from_db()
    assert case.state == S.IN_PROGRESS


def test_reporting_not_fixed_sends_a_resolved_case_back_with_the_explanation(
    ana_client, make_case, make_staff
):
    make_staff("marta", email="marta@sol.example")
    case = seen_case(ana_client, S.RESOLVED, make_case)
    mail.outbox.clear()

    response = write(
        ana_client,
        "report_case_not_fixed",
        {"identifier": ANA_DOCUMENT, "case": case.reference, "message": "Sigue sin centrifugar"},
    )

    assert response.status_code == 200
    assert response.json()["state"] == "in_progress"
    assert case.comments.get().body == "Sigue sin centrifugar"
    [message] = mail.outbox
    assert "Sigue sin centrifugar" in message.body


def test_reporting_not_fixed_on_a_closed_case_offers_a_new_linked_case(ana_client, make_case):
    case = seen_case(ana_client, S.CLOSED, make_case)

    response = write(
        ana_client,
        "report_case_not_fixed",
        {"identifier": ANA_DOCUMENT, "case": case.reference, "message": "x"},
    )

    assert response.status_code == 422
    assert response.json()["state"] == "closed"
    assert "caso nuevo" in response.json()["user_message"]


def test_no_output_carries_internal_ids(ana_client, make_case):
    case = seen_case(ana_client, S.RESOLVED, make_case)
    outputs = [
        ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT}).json(),
        ana_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": case.reference}).json(),
        write(
            ana_client,
            "confirm_case_resolved",
            {"identifier": ANA_DOCUMENT, "case": case.reference},
        ).json(),
    ]

    text = json.dumps(outputs)
    for forbidden in ('"id"', '"pk"', '"contact_id"', "company", "conversation"):
        assert forbidden not in text


def test_a_company_may_require_step_up_verification_to_open_cases(ana_client, company):
    from core.models import StepUpPolicy

    StepUpPolicy.objects.create(company=company, actions=["open_case"])

    response = write(
        ana_client, "open_case", {"identifier": ANA_DOCUMENT, "subject": "S", "description": "d"}
    )

    assert response.status_code == 403
    assert response.json()["code"] == "verification_required"
    assert not Case.objects.exists()
