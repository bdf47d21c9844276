"""The certification self-check: it passes against a sound server, refuses production, and each
check fails when the guarantee it tests is broken.

Live tests run `certify` against pytest-django's live server (real HTTP, real MCP through the
official SDK client) on a sandbox built by `seed_sandbox`. The live server runs in this process,
so a test can break one guarantee in it (monkeypatch) and watch the matching check fail. The
row evaluations are also fed wrong answers directly.
"""

import contextlib
import dataclasses
import json
import re
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from pydantic import ConfigDict

from agenda.models import Appointment
from core.errors import ErrorType
from core.idempotency import IdempotentResult
from core.models import Company, Conversation, IdempotencyRecord
from core.services import gateway_credential_issue
from tests.factories import (
    ANA_DOCUMENT,
    ANA_EMAIL,
    ANA_PHONE,
    BRUNO_DOCUMENT,
    BRUNO_EMAIL,
    BRUNO_PHONE,
)
from tooling.certification.exchange import CHECKS, Contact, Exchange
from tooling.certification.responses import OUTPUT_LIMIT, owned_references, response_problems
from tooling.certification.verdicts import (
    verdict_altered_amount,
    verdict_altered_then_real,
    verdict_empty_list,
    verdict_error,
    verdict_error_shapes,
    verdict_foreign,
    verdict_once,
    verdict_refused_without_effect,
    verdict_terminal,
)
from tooling.models import ExposedReference
from tooling.output import dumps
from tooling.registry import ToolOutput, registry
from tooling.toolkit import ToolContext

ANA = Contact("Ana", "García", ANA_DOCUMENT, ANA_PHONE, ANA_EMAIL)
BRUNO = Contact("Bruno", "López", BRUNO_DOCUMENT, BRUNO_PHONE, BRUNO_EMAIL)


# --- helpers ----------------------------------------------------------------------------------


def seeded_token() -> str:
    out = StringIO()
    call_command("seed_sandbox", stdout=out)
    match = re.search(r"Gateway token:\s+(\S+)", out.getvalue())
    assert match, out.getvalue()
    return match.group(1)


def certify(
    url: str, token: str, tmp_path: Path, mode: str = "legacy"
) -> tuple[int, str, dict[str, Any]]:
    """Run the command as an operator would; its exit code, printed table and JSON report."""
    out, report = StringIO(), tmp_path / "report.json"
    try:
        call_command("certify", url=url, token=token, json_path=str(report), mode=mode, stdout=out)
        code = 0
    except CommandError as error:
        code = error.returncode
    return code, out.getvalue(), json.loads(report.read_text(encoding="utf-8"))


def check(report: dict[str, Any], number: int) -> dict[str, Any]:
    return next(c for c in report["checks"] if c["check"] == number)


def row(report: dict[str, Any], number: int, probe: str) -> dict[str, Any]:
    return next(r for r in check(report, number)["rows"] if r["probe"] == probe)


def exchange(body: Any = None, *, error: bool = False, arguments: dict | None = None) -> Exchange:
    body = body if body is not None else {}
    return Exchange("conv", "tool", arguments or {}, {}, error, dumps(body), body)


def refusal(error_type: str, code: str = "x", **extra: Any) -> Exchange:
    body = {"error_type": error_type, "user_message": "Mensaje.", "code": code, **extra}
    return exchange(body, error=True)


# --- against a live server ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_certify_passes_every_check_against_the_seeded_sandbox(live_server, tmp_path, mode):
    token = seeded_token()

    code, table, report = certify(live_server.url, token, tmp_path, mode=mode)

    assert code == 0, table
    assert report["passed"] is True and report["refused"] is None and report["mode"] == mode
    assert [c["check"] for c in report["checks"]] == list(CHECKS)
    assert all(c["passed"] and c["rows"] for c in report["checks"]), table
    assert "Result: PASS — 7/7 checks" in table
    for line in ("identity switch: cancel_appointment", "busy slot: book_appointment"):
        assert re.search(rf"PASS\s+{re.escape(line)}", table)
    # The run really went through the server: one gateway booking, and it ended cancelled.
    booked = Appointment.objects.filter(created_via=Appointment.Via.GATEWAY)
    assert [a.state for a in booked] == [Appointment.State.CANCELLED]
    assert len(report["exchanges"]) > 50


@pytest.mark.django_db(transaction=True)
def test_certify_refuses_a_production_company_before_any_write(live_server, tmp_path):
    company = Company.objects.create(
        name="Tienda real", slug="tienda-real", environment=Company.Environment.PRODUCTION
    )
    _, token = gateway_credential_issue(company=company, name="gateway")

    code, table, report = certify(live_server.url, token, tmp_path)

    assert code == 2
    assert "REFUSED" in table and "not a declared sandbox" in report["refused"]
    assert report["passed"] is False
    # Only the two reads of the probe were sent: nothing was identified, booked or recorded.
    assert [e["tool"] for e in report["exchanges"]] == ["list_services", "list_services"]
    assert not Conversation.objects.filter(company=company).exists()
    assert not IdempotencyRecord.objects.filter(company=company).exists()
    assert not ExposedReference.objects.filter(company=company).exists()


@pytest.mark.django_db(transaction=True)
def test_certify_refuses_a_sandbox_whose_fault_switch_does_nothing(
    live_server, tmp_path, monkeypatch
):
    token = seeded_token()
    monkeypatch.setattr(
        "tooling.execution.injected_fault", lambda company, fault: contextlib.nullcontext()
    )

    code, _, report = certify(live_server.url, token, tmp_path)

    assert code == 2 and "not a declared sandbox" in report["refused"]


@pytest.mark.django_db(transaction=True)
def test_certify_refuses_a_wrong_token(live_server, tmp_path):
    code, table, report = certify(live_server.url, "gt_not-a-token", tmp_path)

    assert code == 2 and "REFUSED" in table and report["exchanges"] == []


@pytest.mark.django_db(transaction=True)
def test_check_1_fails_when_the_server_forgets_idempotency_keys(live_server, tmp_path, monkeypatch):
    token = seeded_token()

    def run_every_time(*, company, key, operation, request, effect) -> IdempotentResult:
        with transaction.atomic():
            body, status = effect()
        return IdempotentResult(body=body, status=status, replayed=False, text=dumps(body))

    monkeypatch.setattr("tooling.execution.idempotent_execute", run_every_time)

    code, _, report = certify(live_server.url, token, tmp_path)

    assert code == 1
    assert check(report, 1)["passed"] is False
    assert row(report, 1, "same key twice: book_appointment")["passed"] is False
    assert row(report, 1, "same key twice at once: add_case_comment")["passed"] is False


@pytest.mark.django_db(transaction=True)
def test_check_2_fails_when_a_tool_ignores_the_identifier(live_server, tmp_path, monkeypatch):
    token = seeded_token()
    # Agenda tools served for whoever the conversation identified as, whatever identifier
    # comes (the identity check the platform makes for them skipped).
    checked = ToolContext.identify
    agenda = {t.step_up for t in registry.all() if t.handler.__module__ == "agenda.tools"}

    def careless(ctx: ToolContext, identifier: str) -> Any:
        if ctx.step_up_action not in agenda - {None}:
            return checked(ctx, identifier)
        ctx._contact = ctx.conversation.contact
        return ctx._contact

    monkeypatch.setattr(ToolContext, "identify", careless)

    code, _, report = certify(live_server.url, token, tmp_path)

    assert code == 1
    switched = row(report, 2, "identity switch: cancel_appointment")
    assert switched["passed"] is False and "PERMISSION" in switched["got"]
    assert row(report, 2, "identity switch on a read: list_my_appointments")["passed"] is False
    assert row(report, 2, "identity switch: reject_quote")["passed"] is True


class AnyAnswer(ToolOutput):
    model_config = ConfigDict(extra="allow")


@pytest.mark.django_db(transaction=True)
def test_check_6_fails_when_a_tool_leaks_ids_or_another_customer(
    live_server, tmp_path, monkeypatch
):
    token = seeded_token()
    tool = registry.get("list_my_appointments")

    def leaky(ctx, params) -> dict:
        answer = tool.handler(ctx, params)
        answer["id"] = 7
        answer["note"] = "Bruno López (bruno@example.com) pidió la misma hora."
        return answer

    # It lists a schema that allows the leak, or the client would refuse the answer itself.
    leaky_tool = dataclasses.replace(tool, handler=leaky, output=AnyAnswer)
    monkeypatch.setitem(registry._tools, tool.name, leaky_tool)

    code, _, report = certify(live_server.url, token, tmp_path)

    assert code == 1
    assert row(report, 6, "no internal ids")["passed"] is False
    assert "internal id key 'id'" in row(report, 6, "no internal ids")["got"]
    assert row(report, 6, "no other customer's data")["passed"] is False
    assert row(report, 6, "responses at most 3,000 characters")["passed"] is True


# --- row evaluations fed wrong answers ----------------------------------------------------------


def test_the_same_key_check_fails_on_different_answers_or_a_second_effect():
    first = exchange({"appointment": "AP-AAAAAA", "state": "agendada"})
    same = exchange({"appointment": "AP-AAAAAA", "state": "agendada"})
    other = exchange({"appointment": "AP-BBBBBB", "state": "agendada"})
    already = refusal("VALIDATION", "invalid_transition", state="cancelada")

    assert verdict_once(first, same, 0, 1)[0] is True
    assert verdict_once(first, other, 0, 1)[0] is False  # executed twice
    assert verdict_once(first, same, 0, 2)[0] is False  # the read counts two effects
    assert verdict_once(first, same, 0, 0)[0] is False  # no effect at all
    assert verdict_once(first, already, 0, 1)[0] is False  # guard before the key lookup


def test_the_ownership_check_fails_unless_refused_with_nothing_changed():
    assert verdict_foreign(refusal("PERMISSION", "not_owner"), True)[0] is True
    assert verdict_foreign(refusal("VALIDATION", "reference_not_seen"), True)[0] is True
    assert verdict_foreign(exchange({"state": "cancelada"}), False)[0] is False
    assert verdict_foreign(refusal("PERMISSION", "not_owner"), False)[0] is False
    assert verdict_foreign(refusal("VALIDATION", "invalid_transition"), True)[0] is False
    assert verdict_foreign(refusal("NOT_FOUND"), True)[0] is False
    switch = refusal("PERMISSION", "identity_switch")
    assert verdict_refused_without_effect(switch, True, ErrorType.PERMISSION)[0] is True
    assert verdict_refused_without_effect(switch, False, ErrorType.PERMISSION)[0] is False
    assert verdict_refused_without_effect(exchange(), True, ErrorType.PERMISSION)[0] is False


def test_the_terminal_state_check_wants_validation_with_the_state_shown():
    shown = {"appointment": "AP-AAAAAA", "state": "cancelled", "state_label": "cancelada"}

    assert verdict_terminal(refusal("VALIDATION", state="cancelled"), shown)[0] is True
    assert verdict_terminal(refusal("VALIDATION"), shown)[0] is False  # no state
    assert verdict_terminal(refusal("VALIDATION", state="scheduled"), shown)[0] is False
    assert verdict_terminal(refusal("PERMISSION", state="cancelled"), shown)[0] is False
    assert verdict_terminal(exchange({"state": "cancelled"}), shown)[0] is False  # done again


def test_the_amount_check_wants_the_real_total_stated_and_nothing_created():
    def mismatch(total: str, message: str) -> Exchange:
        return refusal("VALIDATION", "total_mismatch", total=total, user_message=message)

    stated = mismatch("13.75", "El total correcto es 13,75 EUR.")
    quoted = exchange({"reference": "QT-AAAAAA", "total": "13.75"})

    assert verdict_altered_amount(stated, Decimal("13.75"))[0] is True
    assert verdict_altered_amount(mismatch("13.75", "El importe no coincide."), None)[0] is False
    assert verdict_altered_amount(stated, Decimal("20.00"))[0] is False
    assert verdict_altered_amount(quoted, None)[0] is False  # the made-up total was accepted
    assert verdict_altered_then_real(stated, quoted, {"QT-AAAAAA"})[0] is True
    wrong = exchange({"reference": "QT-AAAAAA", "total": "14.00"})
    assert verdict_altered_then_real(stated, wrong, {"QT-AAAAAA"})[0] is False
    assert verdict_altered_then_real(stated, quoted, {"QT-AAAAAA", "QT-BBBBBB"})[0] is False
    assert verdict_altered_then_real(stated, None, set())[0] is False


def test_the_outcome_checks_tell_empty_missing_and_down_apart():
    empty = exchange({"items": [], "count": 0, "has_more": False})
    assert verdict_empty_list(empty)[0] is True
    assert verdict_empty_list(refusal("NOT_FOUND"))[0] is False  # "no results" as an error
    assert verdict_empty_list(exchange({"items": [{"sku": "X"}], "count": 1}))[0] is False
    assert verdict_error(refusal("NOT_FOUND"), ErrorType.NOT_FOUND)[0] is True
    assert verdict_error(refusal("NOT_FOUND"), ErrorType.SYSTEM)[0] is False  # outage hidden
    assert verdict_error(exchange({"items": []}), ErrorType.SYSTEM)[0] is False
    assert verdict_error(refusal("VALIDATION", "a"), "VALIDATION", codes=("b",))[0] is False


def test_the_error_shape_check_wants_a_canonical_type_and_a_message():
    assert verdict_error_shapes([refusal("SYSTEM"), refusal("NOT_FOUND")])[0] is True
    assert verdict_error_shapes([refusal("OOPS")])[0] is False
    silent = exchange({"error_type": "VALIDATION", "user_message": ""}, error=True)
    assert verdict_error_shapes([silent])[0] is False
    assert verdict_error_shapes([])[0] is False


def test_response_inspection_flags_ids_third_parties_secrets_and_size():
    def kinds(body: Any, **kwargs: Any) -> set[str]:
        defaults = {"others": [BRUNO], "secrets_": ("gt_secret",)}
        return {k for k, _ in response_problems(exchange(body), **{**defaults, **kwargs})}

    clean = {"items": [{"appointment": "AP-AAAAAA", "professional": "Marta"}], "count": 1}
    assert kinds(clean) == set()
    assert kinds({"items": [{"id": 41}]}) == {"ids"}
    assert kinds({"contact_id": 3}) == {"ids"}
    assert kinds({"ref": "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"}) == {"ids"}
    assert kinds({"note": BRUNO_EMAIL}) == {"third"}
    assert kinds({"note": "Bruno López"}) == {"third"}
    assert kinds({"note": "tel. 600333444"}) == {"third"}
    assert kinds({"case": "CS-BBBBBB"}, foreign_references={"CS-BBBBBB"}) == {"third"}
    assert kinds({"note": "gt_secret"}) == {"secrets"}
    assert kinds({"detail": "Traceback (most recent call last):"}) == {"secrets"}
    assert kinds({"text": "x" * OUTPUT_LIMIT}) == {"size"}
    # The speaker's own data, and what the caller itself sent, are not leaks.
    assert kinds({"note": ANA_EMAIL}) == set()
    echoed = exchange({"message": "No encontré CS-BBBBBB"}, arguments={"case": "CS-BBBBBB"})
    assert response_problems(echoed, others=[BRUNO], foreign_references={"CS-BBBBBB"}) == []


def test_owned_references_come_from_each_customers_own_conversations():
    mine = exchange({"items": [{"appointment": "AP-AAAAAA", "slot": "SL-CCCCCC"}]})
    mine.speaker = ANA
    theirs = exchange({"reference": "QT-BBBBBB", "status": "sent"})
    theirs.speaker = BRUNO
    failed = refusal("VALIDATION")
    failed.speaker = BRUNO

    owned = owned_references([mine, theirs, failed])

    assert owned == {ANA: {"AP-AAAAAA"}, BRUNO: {"QT-BBBBBB"}}
