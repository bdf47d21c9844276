"""The worst Gateway we can imagine, as a Hypothesis state machine (issue #34).

It double-sends, reorders, invents references, dates and prices, mixes customers and
companies up, retries at random and meets injected faults; after every step the oracle
(tests/properties/oracle.py) says what must be true. The transport is chosen by a subclass:
in process (POST /mcp through Django's test client) or a live server with the MCP SDK.
"""

import contextlib
import re
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from core.models import IdempotencyRecord, OutboxMessage, VerificationChallenge
from core.references import ALPHABET
from support.models import Case
from support.services import case_resolve, case_start
from tests.properties.oracle import (
    LIVE,
    TERMINAL,
    Conversation,
    Entity,
    Oracle,
    check,
    fold,
    quote_lines,
    quote_total,
)
from tests.properties.transports import Answer
from tests.properties.world import PRICES, SERVICE, UNSELLABLE, World, build_world, fresh_phone

# Rule name -> times it ran, over every example of the process (the soak's report).
RULES_HIT: Counter = Counter()
STEPS = Counter()

WRITES = {
    "identify_contact",
    "request_verification_code",
    "verify_code",
    "update_contact_details",
    "confirm_contact_change",
    "book_appointment",
    "reschedule_appointment",
    "cancel_appointment",
    "create_quote",
    "accept_quote",
    "reject_quote",
    "request_sales_contact",
    "open_case",
    "add_case_comment",
    "confirm_case_resolved",
    "report_case_not_fixed",
}
READS = {
    "list_services",
    "find_available_slots",
    "list_my_appointments",
    "search_products",
    "list_my_quotes",
    "get_quote",
    "list_my_cases",
    "get_case",
    "verification_status",
}
REFERENCE_ARGUMENT = {
    "book_appointment": [("slot", "SL")],
    "reschedule_appointment": [("appointment", "AP"), ("slot", "SL")],
    "cancel_appointment": [("appointment", "AP")],
    "accept_quote": [("quote", "QT")],
    "reject_quote": [("quote", "QT")],
    "add_case_comment": [("case", "CS")],
    "confirm_case_resolved": [("case", "CS")],
    "report_case_not_fixed": [("case", "CS")],
    "open_case": [("related_case", "CS")],
}


# A write on the speaker's own entity of each kind, with the argument naming it: what
# `reference_of_another_conversation` tries with a reference this conversation never saw.
OWN_WRITE_OF = {
    "AP": ("cancel_appointment", "appointment"),
    "QT": ("reject_quote", "quote"),
    "CS": ("add_case_comment", "case"),
}


# The writes that declare an intent (core.idempotency.intent), which a model may re-plan.
REPLANNED = {
    "book_appointment",
    "reschedule_appointment",
    "create_quote",
    "request_sales_contact",
    "open_case",
}

# "...: su código de verificación es 123456. Caduca ..." (core.verification.delivery)
CODE_IN_MESSAGE = re.compile(r"\b(\d{6})\. ")
# The step-up action a tool answers to when it is not its own name.
STEP_UP_ACTION = {"confirm_contact_change": "update_contact_details"}
# Errors of confirm_contact_change after which its code takes no more guesses, and those that
# took one of its attempts.
CHANGE_CODE_GONE = {"verification_locked", "code_used", "code_expired", "code_revoked"}
CHANGE_CODE_TRIED = {"wrong_code", "code_for_current_channel"}


class WorkerKilled(BaseException):
    """The process serving the call dies: no answer, and nothing after this point runs."""


def spanish_weekday(day: date) -> str:
    return ["lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"][day.weekday()]


def spring_forward(after: date) -> date:
    """The next last Sunday of March (Europe/Madrid's 02:00 -> 03:00)."""
    year = after.year if after < date(after.year, 3, 25) else after.year + 1
    day = date(year, 3, 31)
    return day - timedelta(days=(day.weekday() - 6) % 7)


class GatewayMachine(RuleBasedStateMachine):
    """Subclasses set `make_transport(world)` and may turn rules off with `in_process`."""

    conversations = Bundle("conversations")

    def make_transport(self, world: World) -> Any:  # pragma: no cover - set by subclasses
        raise NotImplementedError

    def read_code(
        self, conversation: Conversation, channel: str, since: int, to: str | None = None
    ) -> str | None:
        """The code the customer received after `since` (a mark from `code_mark`), at their
        registered phone or email, or at `to` (a new one they asked to change to): the world's
        companies are sandboxes, whose messages are kept in their outbox (in the database, so
        whichever process sent them)."""
        speaker = conversation.speaker
        texts = OutboxMessage.objects.filter(
            pk__gt=since,
            company=self.world.tenants[speaker.tenant].company,
            channel=channel,
            destination=to or (speaker.phone if channel == "sms" else speaker.email),
        ).order_by("pk")
        found = (CODE_IN_MESSAGE.search(text) for text in texts.values_list("body", flat=True))
        codes = [match.group(1) for match in found if match]
        return codes[-1] if codes else None

    def code_mark(self, channel: str) -> int:
        return OutboxMessage.objects.order_by("-pk").values_list("pk", flat=True).first() or 0

    channels = ("sms", "email")

    def __init__(self) -> None:
        super().__init__()
        self.world = build_world()
        self.transport = self.make_transport(self.world)
        self.oracle = Oracle(self.world)
        self.customers = {t: tenant.customers for t, tenant in self.world.tenants.items()}
        self._caller_checked = False

    def teardown(self) -> None:
        self.transport.close()

    # --- sending ---

    def hit(self, name: str) -> None:
        RULES_HIT[name] += 1
        STEPS["steps"] += 1

    def key(self) -> str:
        return f"props-{uuid.uuid4().hex}"

    def send(
        self,
        conversation: Conversation,
        tool: str,
        arguments: dict[str, Any],
        *,
        key: str | None = None,
        fault: str | None = None,
        judge: bool = True,
    ) -> Answer:
        """One tools/call, judged: the answer's shape, then (writes) the key's history, then
        what the model says this conversation may do."""
        if tool in WRITES and key is None:
            key = self.key()
        self.oracle.fault_injected = fault is not None
        answer = self.transport.call(
            conversation.tenant, conversation.id, tool, arguments, key=key, fault=fault
        )
        if judge:
            self.judge(conversation, tool, arguments, key, answer)
        self.oracle.fault_injected = False
        if tool in WRITES:
            conversation.last_write = (tool, arguments, key)
        if judge and tool in REPLANNED and not answer.is_error:
            reference = answer.body.get("appointment") or answer.body.get("reference")
            entity = self.oracle.entities.get(reference)
            conversation.last_done = (tool, arguments, reference, entity and entity.intent)
        return answer

    def judge(
        self,
        conversation: Conversation,
        tool: str,
        arguments: dict[str, Any],
        key: str | None,
        answer: Answer,
        *,
        contended: bool = False,
    ) -> None:
        self.oracle.answer_shape(conversation, tool, answer)
        if fault := self.oracle.fault_injected:
            check(
                answer.is_error and answer.error_type == "SYSTEM",
                f"{tool}: the injected fault was not SYSTEM",
                fault,
                answer.short(),
            )
            return
        if tool in WRITES:
            stored = self.oracle.replay_expected(conversation.tenant, tool, arguments, key)
            if stored is not None:
                self.oracle.judge_replay(stored, tool, arguments, answer)
                return
            self.oracle.fresh_key_errors(tool, answer, contended=contended)
        if answer.code in ("request_in_progress",):
            return
        self.expect(conversation, tool, arguments, answer)
        if tool in WRITES:
            self.oracle.store(conversation.tenant, tool, arguments, key, answer)

    # --- what the model allows and records, per tool ---

    def identified_as(self, conversation: Conversation, given: str | None) -> bool:
        speaker = conversation.speaker
        return speaker is not None and given is not None and self.designates(speaker, given)

    def designates(self, customer: Any, given: str) -> bool:
        folded = re.sub(r"[\s.\-]", "", given).casefold()
        values = {re.sub(r"[\s.\-]", "", v).casefold() for v in customer.identifiers()}
        values |= {v.removeprefix("+34") for v in values if v.startswith("+34")}
        return folded in values

    def expect(
        self, conversation: Conversation, tool: str, arguments: dict[str, Any], answer: Answer
    ) -> None:
        body = answer.body if isinstance(answer.body, dict) else {}
        identifier = arguments.get("identifier")
        ok = not answer.is_error
        tenant = self.world.tenants[conversation.tenant]
        if "identifier" in arguments and isinstance(identifier, str):
            if ok:
                check(
                    self.identified_as(conversation, identifier),
                    f"{tool}: acted for an identifier that is not the conversation's customer",
                    identifier,
                    conversation.speaker and conversation.speaker.label,
                )
            elif conversation.speaker is not None and not self.identified_as(
                conversation, identifier
            ):
                if answer.code in ("identity_mismatch", "too_many_attempts"):
                    # An identifier not the speaker's voids the verification, at the limit
                    # too (where the refusal answers before the identifier is looked up),
                    # and the code the conversation was sent before it.
                    conversation.verified = "no"
                    conversation.code_spent = True
                elif answer.error_type == "PERMISSION" and conversation.verified != "no":
                    # Any other refusal may or may not have dropped it; a "maybe" stays
                    # "maybe", never a certain "no".
                    conversation.verified = "maybe"
        if ok and STEP_UP_ACTION.get(tool, tool) in tenant.step_up:
            check(
                conversation.verified != "no",
                f"{tool}: a protected action ran without a verification",
            )
        for argument, kind in REFERENCE_ARGUMENT.get(tool, []):
            given = arguments.get(argument)
            if ok and isinstance(given, str):
                resolved = conversation.resolve(kind, given)
                check(
                    len(resolved) == 1,
                    f"{tool}: acted on a {kind} reference this conversation was not shown",
                    given,
                )
                entity = self.oracle.entities.get(resolved[0])
                if entity is not None:
                    check(
                        entity.owner == conversation.speaker,
                        f"{tool}: acted on another customer's {kind}",
                        given,
                    )
        # A refusal is about the target's state only once the caller is who it says and the
        # call's other references are ones this conversation was shown.
        self._caller_checked = (
            not isinstance(identifier, str) or self.identified_as(conversation, identifier)
        ) and all(
            len(conversation.resolve(kind, arguments[argument])) == 1
            for argument, kind in REFERENCE_ARGUMENT.get(tool, [])
            if isinstance(arguments.get(argument), str)
        )
        handler = getattr(self, f"expect_{tool}", None)
        if handler is not None:
            handler(conversation, arguments, answer, body)

    def _terminal_refused(self, tool: str, entity: Entity | None, answer: Answer) -> None:
        if entity is None or entity.state not in TERMINAL[entity.kind]:
            return
        check(answer.is_error, f"{tool}: a {entity.kind} in terminal state {entity.state} changed")
        if (
            self._caller_checked
            and answer.error_type == "VALIDATION"
            and answer.code != "invalid_arguments"
        ):
            check("state" in answer.body, f"{tool}: a terminal-state refusal without its state")

    def _target(self, conversation: Conversation, kind: str, given: Any) -> Entity | None:
        if not isinstance(given, str):
            return None
        resolved = conversation.resolve(kind, given)
        if len(resolved) != 1:
            return None
        entity = self.oracle.entities.get(resolved[0])
        if entity is not None and entity.owner == conversation.speaker:
            return entity
        return None

    def _new(self, conversation: Conversation, kind: str, reference: str, state: str, **extra):
        check(reference not in self.oracle.entities, f"a {kind} reference handed out twice")
        entity = Entity(reference, kind, conversation.tenant, conversation.speaker, state, **extra)
        self.oracle.entities[reference] = entity
        self.oracle.effects[(conversation.tenant, kind)] += 1
        conversation.saw(kind, reference)
        return entity

    def expect_identify_contact(self, conversation, arguments, answer, body) -> None:
        given = [v for v in arguments.values() if isinstance(v, str)]
        targets = [
            c
            for c in self.customers[conversation.tenant]
            if len(given) == 1 and self.designates(c, given[0])
        ]
        if answer.is_error:
            foreign = conversation.speaker is not None and not (
                targets and targets[0] == conversation.speaker
            )
            if answer.code == "identity_switch" or (foreign and answer.code == "too_many_attempts"):
                conversation.verified = "no"
                conversation.code_spent = True  # an alarm voids a pending code too
            check(
                not (targets and conversation.speaker in (None, targets[0]))
                or answer.error_type in ("PERMISSION", "VALIDATION"),
                "identify_contact: the customer was refused",
                answer.short(),
            )
            return
        if body.get("identified") is False:
            # Verified mode (a limit shared by all conversations stands): nobody is bound, the
            # same answer for every identifier; verify_code with the code binds.
            check(
                conversation.speaker is None and body.get("first_name") is None,
                "identify_contact: a verified-mode answer told who it was",
                body,
            )
            return
        check(len(targets) == 1, "identify_contact: identified with nobody's identifier", given)
        check(
            conversation.speaker in (None, targets[0]),
            "identify_contact: the identity changed mid-conversation",
            conversation.speaker and conversation.speaker.label,
            targets[0].label,
        )
        check(body.get("first_name") == targets[0].first_name, "identify_contact: who", body)
        conversation.speaker = targets[0]

    def expect_find_available_slots(self, conversation, arguments, answer, body) -> None:
        tz = self.world.tenants[conversation.tenant].company.tz
        start = self._date_of(arguments.get("from"))
        today = timezone.now().astimezone(tz).date()
        if start is not None and start > today + timedelta(days=self._horizon()):
            check(answer.is_error, "find_available_slots: a search past the horizon answered")
        if answer.is_error:
            return
        moving = conversation.resolve("AP", arguments.get("appointment") or "")
        for item in body["items"]:
            label = self.oracle.slot_item(conversation.tenant, item, moving)
            check(
                item["weekday"].casefold() == spanish_weekday(date.fromisoformat(item["date"])),
                "a slot's weekday is not its date's",
                item,
            )
            if start is not None:
                check(item["date"] >= start.isoformat(), "a slot before the day asked", item)
            self.oracle.slots[item["slot"]] = (conversation.tenant, label)
            self.oracle.slot_professional[item["slot"]] = item["professional"]
            conversation.saw("SL", item["slot"], label)

    def _horizon(self) -> int:
        from tests.properties.world import HORIZON_DAYS

        return HORIZON_DAYS

    @staticmethod
    def _date_of(text: Any) -> date | None:
        try:
            return date.fromisoformat(text)
        except (TypeError, ValueError):
            return None

    def _show_listing(self, conversation: Conversation, kind: str, field: str, body: dict):
        for item in body.get("items", []):
            reference = item[field]
            entity = self.oracle.entities.get(reference)
            check(entity is not None, f"a {kind} listed that no success created", reference)
            label = f"{item['date']} {item['time']}" if kind == "AP" else None
            conversation.saw(kind, reference, label)
            check(
                item["state"] == entity.state or entity.state not in TERMINAL[kind],
                f"a terminal {kind} listed in another state",
                reference,
                entity.state,
                item["state"],
            )
            if item["state"] != "expired":
                entity.state = item["state"]

    def expect_list_my_appointments(self, conversation, arguments, answer, body) -> None:
        if not answer.is_error:
            self._show_listing(conversation, "AP", "appointment", body)

    def expect_list_my_quotes(self, conversation, arguments, answer, body) -> None:
        if not answer.is_error:
            self._show_listing(conversation, "QT", "reference", body)
            for item in body["items"]:
                entity = self.oracle.entities[item["reference"]]
                check(item["total"] == entity.total, "a quote's total changed", item)

    def expect_list_my_cases(self, conversation, arguments, answer, body) -> None:
        if not answer.is_error:
            self._show_listing(conversation, "CS", "reference", body)

    def expect_get_quote(self, conversation, arguments, answer, body) -> None:
        if answer.is_error:
            return
        entity = self.oracle.entities.get(body["reference"])
        check(entity is not None and entity.owner == conversation.speaker, "get_quote: whose")
        check(body["total"] == entity.total, "get_quote: the total changed", body["total"])
        conversation.saw("QT", body["reference"])

    def expect_get_case(self, conversation, arguments, answer, body) -> None:
        if answer.is_error:
            return
        entity = self.oracle.entities.get(body["reference"])
        check(entity is not None and entity.owner == conversation.speaker, "get_case: whose")
        conversation.saw("CS", body["reference"])
        if body.get("related_case"):
            conversation.saw("CS", body["related_case"])

    def _for_intent(
        self,
        conversation: Conversation,
        tool: str,
        kind: str,
        reference: str,
        state: str,
        intent: tuple | None,
        already_done: Any,
        **extra: Any,
    ) -> Entity:
        """A success of a write that declares an intent (core.idempotency.intent): the record
        that already stands for the intent, answered `already_done` and made no second time,
        or a new one when none stood for it. An explicit second one (`intent` None) is new."""
        live = self.oracle.live(intent) if intent is not None else []
        if already_done is True:
            check(live, f"{tool}: already_done for a request never made", intent)
            check(
                reference in [e.reference for e in live],
                f"{tool}: already_done answered another record than the request's",
                reference,
                [e.reference for e in live],
            )
            conversation.saw(kind, reference)
            return self.oracle.entities[reference]
        check(already_done is False, f"{tool}: the answer does not say already_done", reference)
        check(
            not live,
            f"{tool}: a re-planned request made a second record",
            intent,
            [e.reference for e in live],
        )
        if intent is not None:
            self.oracle.intent_effects[intent] += 1
        return self._new(conversation, kind, reference, state, intent=intent, **extra)

    def _slot_intent(self, conversation: Conversation, slot: str, label: str) -> tuple:
        """A booking's intent: the company, the customer and the slot (its time and the
        professional it was shown with; one service)."""
        return (
            "AP",
            conversation.tenant,
            conversation.speaker.label,
            label,
            self.oracle.slot_professional[slot],
        )

    def expect_book_appointment(self, conversation, arguments, answer, body) -> None:
        if answer.is_error:
            return
        slot = conversation.resolve("SL", arguments["slot"])[0]
        label = f"{body['date']} {body['time']}"
        check(label == self.oracle.slots[slot][1], "booked at another time than the slot's")
        check(body["state"] == "scheduled", "a booking answered not scheduled", body)
        entity = self._for_intent(
            conversation,
            "book_appointment",
            "AP",
            body["appointment"],
            "scheduled",
            self._slot_intent(conversation, slot, label),
            body.get("already_done"),
        )
        conversation.labels[entity.reference] = label

    def expect_reschedule_appointment(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "AP", arguments.get("appointment"))
        self._terminal_refused("reschedule_appointment", entity, answer)
        if answer.is_error:
            return
        slot = conversation.resolve("SL", arguments["slot"])[0]
        label = f"{body['date']} {body['time']}"
        check(label == self.oracle.slots[slot][1], "moved to another time than the slot's")
        check(body["appointment"] == entity.reference, "reschedule answered another one")
        conversation.labels[entity.reference] = label
        # Moved, it stands for a booking of its new slot; a move to where it already is
        # (an earlier call moved it, with another key) is already done, and moves nothing.
        intent = self._slot_intent(conversation, slot, label)
        check(
            body.get("already_done") is (entity.intent == intent),
            "reschedule_appointment: already_done is not whether it was already there",
            body.get("already_done"),
            entity.intent,
            intent,
        )
        entity.intent = intent

    def expect_cancel_appointment(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "AP", arguments.get("appointment"))
        self._terminal_refused("cancel_appointment", entity, answer)
        if not answer.is_error:
            check(body["state"] == "cancelled", "cancel answered another state", body)
            entity.state = "cancelled"

    def expect_create_quote(self, conversation, arguments, answer, body) -> None:
        items = [(i["sku"], i["quantity"]) for i in arguments.get("items", [])]
        total = quote_total(items)
        expected = arguments.get("expected_total")
        if answer.is_error:
            return
        check(total is not None, "create_quote: priced an item that cannot be sold", items)
        check(Decimal(body["total"]) == total, "create_quote: not the catalogue's total", body)
        if expected is not None:
            check(Decimal(str(expected)) == total, "create_quote: took the caller's total")
        intent = ("QT", conversation.tenant, conversation.speaker.label, quote_lines(items))
        self._for_intent(
            conversation,
            "create_quote",
            "QT",
            body["reference"],
            "sent",
            None if arguments.get("new_quote") else intent,
            body.get("already_done"),
            total=body["total"],
            items=items,
        )

    def expect_accept_quote(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "QT", arguments.get("quote"))
        self._terminal_refused("accept_quote", entity, answer)
        if answer.is_error:
            return
        expected = arguments.get("expected_total")
        if expected is not None:
            check(
                Decimal(str(expected)) == Decimal(entity.total),
                "accept_quote: accepted with another total",
            )
        check(body["state"] == "accepted", "accept answered another state", body)
        entity.state = "accepted"
        for sku, quantity in entity.items:
            if sku in PRICES and sku != "MOL-003":
                self.oracle.reserved[(conversation.tenant, sku)] += quantity

    def expect_reject_quote(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "QT", arguments.get("quote"))
        self._terminal_refused("reject_quote", entity, answer)
        if not answer.is_error:
            check(body["state"] == "rejected", "reject answered another state", body)
            entity.state = "rejected"

    def expect_request_sales_contact(self, conversation, arguments, answer, body) -> None:
        if answer.is_error:
            return
        intent = ("OP", conversation.tenant, conversation.speaker.label, fold(arguments["topic"]))
        self._for_intent(
            conversation,
            "request_sales_contact",
            "OP",
            body["reference"],
            body["state"],
            None if arguments.get("new_request") else intent,
            body.get("already_done"),
        )

    def expect_open_case(self, conversation, arguments, answer, body) -> None:
        """Free text is no intent: while a case of the customer's opened in the window stands
        open, another is a possible duplicate naming it, unless the call says new_case."""
        speaker = conversation.speaker
        open_cases = [
            e.reference
            for e in self.oracle.entities.values()
            if e.kind == "CS"
            and e.tenant == conversation.tenant
            and e.owner == speaker
            and e.state in LIVE["CS"]
        ]
        if answer.code == "possible_duplicate":
            check(not arguments.get("new_case"), "open_case: possible_duplicate despite new_case")
            check(
                answer.error_type == "CONFLICT" and answer.body.get("case") in open_cases,
                "open_case: possible_duplicate naming no open case of the customer's",
                answer.short(),
                open_cases,
            )
            return
        if answer.is_error:
            return
        check(
            arguments.get("new_case") or not open_cases,
            "open_case: a second case opened while one stood open",
            open_cases,
        )
        intent = None if arguments.get("new_case") else ("CS", conversation.tenant, speaker.label)
        self.oracle.intent_effects[intent] += intent is not None
        self._new(conversation, "CS", body["reference"], body["state"], intent=intent)

    def expect_add_case_comment(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "CS", arguments.get("case"))
        self._terminal_refused("add_case_comment", entity, answer)
        if not answer.is_error and entity is not None:
            entity.state = body["state"]

    def expect_confirm_case_resolved(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "CS", arguments.get("case"))
        self._terminal_refused("confirm_case_resolved", entity, answer)
        if not answer.is_error:
            check(entity.state == "resolved", "closed a case that was not resolved", entity.state)
            entity.state = "closed"

    def expect_report_case_not_fixed(self, conversation, arguments, answer, body) -> None:
        entity = self._target(conversation, "CS", arguments.get("case"))
        self._terminal_refused("report_case_not_fixed", entity, answer)
        if not answer.is_error:
            check(entity.state == "resolved", "reopened a case that was not resolved")
            entity.state = body["state"]

    def expect_update_contact_details(self, conversation, arguments, answer, body) -> None:
        check(
            answer.code != "identifier_taken",
            "update_contact_details: said a value is taken before any code came back",
            arguments,
        )
        if answer.is_error:
            return
        check(body.get("updated") is False, "update_contact_details: changed at once", body)
        field = "phone" if arguments.get("phone") else "email"
        value = arguments[field] if field == "phone" else arguments[field].strip().lower()
        # A new change supersedes the conversation's earlier one; its code is read by the rule.
        conversation.change = (field, value, None)
        conversation.change_spent, conversation.change_attempts = False, 0

    def expect_confirm_contact_change(self, conversation, arguments, answer, body) -> None:
        change = conversation.change
        right = change is not None and change[2] is not None and arguments["code"] == change[2]
        if answer.is_error:
            if answer.code == "identifier_taken":
                check(right, "confirm_contact_change: said taken without the right code")
                check(self._held_by_another(conversation, change), "taken, but by nobody")
                conversation.change_spent = True
            elif change is not None and answer.code in CHANGE_CODE_GONE:
                conversation.change_spent = True
            elif change is not None and answer.code in CHANGE_CODE_TRIED:
                conversation.change_attempts += 1
                if conversation.change_attempts >= settings.GARANTE_VERIFICATION_MAX_ATTEMPTS:
                    conversation.change_spent = True
            return
        check(right, "confirm_contact_change: a code not sent to the new value changed it")
        check(not conversation.change_spent, "confirm_contact_change: a spent code changed it")
        check(
            conversation.change_attempts < settings.GARANTE_VERIFICATION_MAX_ATTEMPTS,
            "confirm_contact_change: changed past the attempts allowed",
        )
        check(
            not self._held_by_another(conversation, change),
            "confirm_contact_change: took another customer's phone or email",
            change,
        )
        field, value, _code = change
        speaker = conversation.speaker
        speaker.former.add(getattr(speaker, field))
        setattr(speaker, field, value)
        conversation.change_spent = True

    def _held_by_another(self, conversation: Conversation, change: Any) -> bool:
        field, value, _code = change
        return any(
            getattr(c, field) == value
            for c in self.customers[conversation.tenant]
            if c != conversation.speaker
        )

    def expect_request_verification_code(self, conversation, arguments, answer, body) -> None:
        if not answer.is_error:
            conversation.code_spent = True  # the earlier code is superseded

    def expect_verify_code(self, conversation, arguments, answer, body) -> None:
        if answer.is_error:
            if conversation.code is not None and not conversation.code_spent:
                conversation.code_attempts += 1
                if conversation.code_attempts >= settings.GARANTE_VERIFICATION_MAX_ATTEMPTS:
                    conversation.code_spent = True
            return
        check(
            conversation.code is not None and arguments["code"] == conversation.code,
            "verify_code: a code the customer was not sent verified",
            arguments["code"],
        )
        check(not conversation.code_spent, "verify_code: a used, expired or locked code verified")
        check(
            conversation.code_attempts < settings.GARANTE_VERIFICATION_MAX_ATTEMPTS,
            "verify_code: verified past the attempts allowed",
        )
        conversation.verified = "yes"
        conversation.code_spent = True

    # --- argument strategies ---

    def identifier(self, data: Any, conversation: Conversation) -> str:
        """Whose identifier the model sends: the speaker's (as written or reformatted),
        another customer's, another company's only customer's, or nobody's."""
        tenant = conversation.tenant
        options = ["other", "invented"]
        if conversation.speaker is not None:
            options += ["speaker", "speaker", "speaker"]
        choice = data.draw(st.sampled_from(options), label="identifier is")
        if choice == "invented":
            return data.draw(
                st.sampled_from(["99999999R", "+34699000111", "nadie@example.com", "XYZ"]),
                label="invented identifier",
            )
        if choice == "speaker":
            customer = conversation.speaker
        else:
            others = [c for c in self.customers[tenant] if c != conversation.speaker]
            customer = data.draw(st.sampled_from(others), label="other customer")
        return data.draw(st.sampled_from(self.spellings(customer)), label="spelled")

    def spellings(self, customer: Any) -> list[str]:
        spelled = [customer.document, customer.document.lower(), customer.email.upper()]
        spelled += [customer.phone, " ".join(re.findall(r"\d{3}", customer.phone[3:]))]
        return [s for s in spelled if s]

    def reference(self, data: Any, conversation: Conversation, kind: str) -> str:
        """A reference of `kind`: shown here, its ending, shown in another conversation,
        another customer's, another company's, or invented."""
        mine = conversation.shown.get(kind, [])
        elsewhere = sorted(
            {
                r
                for c in self.oracle.conversations
                if c is not conversation and c.tenant == conversation.tenant
                for r in c.shown.get(kind, [])
            }
            - set(mine)
        )
        if kind == "SL":
            foreign = sorted(
                r for r, (t, _l) in self.oracle.slots.items() if t != conversation.tenant
            )
            theirs: list[str] = []
        else:
            foreign = sorted(
                e.reference
                for e in self.oracle.entities.values()
                if e.kind == kind and e.tenant != conversation.tenant
            )
            theirs = sorted(
                e.reference
                for e in self.oracle.entities.values()
                if e.kind == kind
                and e.tenant == conversation.tenant
                and e.owner != conversation.speaker
            )
        pools = {
            "shown": mine,
            "ending": [r[-4:] for r in mine],
            "label": [conversation.labels[r] for r in mine if r in conversation.labels],
            "other conversation": elsewhere,
            "other customer": theirs,
            "other company": foreign,
        }
        weights = ["shown"] * 4 + [name for name, pool in pools.items() if pool]
        choice = data.draw(
            st.sampled_from([w for w in weights if pools.get(w)] + ["invented"]),
            label=f"{kind} reference is",
        )
        if choice == "invented":
            return f"{kind}-" + data.draw(
                st.text(alphabet=ALPHABET, min_size=6, max_size=6), label="invented"
            )
        return data.draw(st.sampled_from(pools[choice]), label=f"{kind} {choice}")

    def day(self, data: Any, conversation: Conversation) -> str:
        tz = self.world.tenants[conversation.tenant].company.tz
        today = timezone.now().astimezone(tz).date()
        horizon = self._horizon()
        options = {
            "hoy": "hoy",
            "mañana": "mañana",
            "soon": (today + timedelta(days=data.draw(st.integers(0, 20)))).isoformat(),
            "past": (today - timedelta(days=data.draw(st.integers(1, 400)))).isoformat(),
            "horizon edge": (today + timedelta(days=horizon)).isoformat(),
            "beyond horizon": (
                today + timedelta(days=horizon + data.draw(st.integers(1, 3)))
            ).isoformat(),
            "dst gap": spring_forward(today).isoformat(),
            "not a date": data.draw(st.sampled_from(["2027-02-30", "31/12/2026", "ayer noche"])),
        }
        choice = data.draw(st.sampled_from(sorted(options)), label="search from")
        return options[choice]

    def items(self, data: Any) -> list[dict[str, Any]]:
        skus = [*sorted(PRICES), "TAZ-002", "TAZ-002"]
        if data.draw(st.integers(0, 9), label="unsellable?") == 0:
            skus = list(UNSELLABLE)
        chosen = data.draw(st.lists(st.sampled_from(skus), min_size=1, max_size=3, unique=True))
        return [{"sku": s, "quantity": data.draw(st.integers(1, 3), label=s)} for s in chosen]

    def amount(self, data: Any, real: Decimal | None) -> Any:
        choice = data.draw(
            st.sampled_from(["none", "right", "right", "off by a cent", "made up", "as number"]),
            label="expected_total",
        )
        if choice == "none" or real is None:
            return None
        if choice == "right":
            return str(real)
        if choice == "off by a cent":
            return str(real + Decimal("0.01"))
        if choice == "as number":
            return float(real)
        return data.draw(st.sampled_from(["0", "1.00", "99999.99", "10.5"]))

    def write_call(self, data: Any, conversation: Conversation) -> tuple[str, dict[str, Any]]:
        """A write the model might send now, with arguments drawn like the rules draw them."""
        tool = data.draw(
            st.sampled_from(
                ["open_case", "request_sales_contact", "create_quote", "identify_contact"]
            ),
            label="write",
        )
        if tool == "identify_contact":
            customer = data.draw(st.sampled_from(self.customers[conversation.tenant]))
            return tool, {"document": customer.document}
        identifier = self.identifier(data, conversation)
        if tool == "open_case":
            return tool, {
                "identifier": identifier,
                "subject": f"Avería {secrets.token_hex(2)}",
                "description": "No funciona desde ayer.",
            }
        if tool == "request_sales_contact":
            return tool, {"identifier": identifier, "topic": f"Presupuesto {secrets.token_hex(2)}"}
        return tool, {"identifier": identifier, "items": self.items(data)}

    # --- rules: conversations and identity ---

    @initialize(target=conversations)
    def first_conversation(self) -> Conversation:
        return self._conversation("A")

    def _conversation(self, tenant: str) -> Conversation:
        conversation = Conversation(id=f"conv-{uuid.uuid4().hex[:12]}", tenant=tenant)
        self.oracle.conversations.append(conversation)
        return conversation

    @rule(target=conversations, tenant=st.sampled_from(["A", "B"]), data=st.data())
    def new_conversation(self, tenant: str, data: Any) -> Conversation:
        """Another conversation of either company; most start by identifying someone."""
        self.hit("new_conversation")
        conversation = self._conversation(tenant)
        if data.draw(st.integers(0, 3), label="identified first") > 0:
            customer = data.draw(st.sampled_from(self.customers[tenant]), label="as")
            self.send(conversation, "identify_contact", {"document": customer.document})
        return conversation

    @rule(conversation=conversations, data=st.data())
    def identify(self, conversation: Conversation, data: Any) -> None:
        """The right customer, another one (a switch when already identified), or nobody,
        by document, phone or email, spelled as customers spell them."""
        self.hit("identify")
        customers = self.customers[conversation.tenant]
        who = data.draw(st.sampled_from(["right", "right", "other", "unknown", "two at once"]))
        if who == "unknown":
            arguments = data.draw(
                st.sampled_from(
                    [{"document": "00000000T"}, {"phone": "699999999"}, {"email": "x@y.es"}]
                )
            )
        elif who == "two at once":
            customer = customers[0]
            arguments = {"document": customer.document, "email": customer.email}
        else:
            if who == "right" and conversation.speaker is not None:
                customer = conversation.speaker
            else:
                customer = data.draw(st.sampled_from(customers))
            kind = data.draw(st.sampled_from(["document", "phone", "email"]))
            value = {"document": customer.document, "phone": customer.phone}.get(
                kind, customer.email
            )
            if kind == "phone" and data.draw(st.booleans(), label="national"):
                value = value.removeprefix("+34")
            arguments = {kind: value}
        answer = self.send(conversation, "identify_contact", arguments)
        if who == "two at once":
            check(answer.code == "invalid_arguments", "two identifiers at once were accepted")

    @rule(tenant=st.sampled_from(["A", "B"]), data=st.data())
    def enumerate_identifiers(self, tenant: str, data: Any) -> None:
        """A model (or whoever holds its token) tries identifier after identifier in one
        conversation: past the conversation's limit, even a real customer's is refused,
        PERMISSION too_many_attempts with the wait, and the conversation stays anonymous."""
        self.hit("enumerate_identifiers")
        conversation = self._conversation(tenant)
        company = self.world.tenants[tenant].company
        guesses = data.draw(
            st.lists(
                st.sampled_from(
                    ["00000000T", "11111111H", "699999999", "x@y.es", "nadie@example.com"]
                ),
                min_size=company.identify_failures_per_conversation,
                max_size=company.identify_failures_per_conversation,
            ),
            label="guesses",
        )
        for guess in guesses:
            kind = "email" if "@" in guess else "phone" if guess.startswith("6") else "document"
            answer = self.send(conversation, "identify_contact", {kind: guess})
            check(answer.is_error, "identify_contact: a guess identified somebody", guess)
        customer = data.draw(st.sampled_from(self.customers[tenant]), label="then a real one")
        answer = self.send(conversation, "identify_contact", {"document": customer.document})
        check(
            answer.error_type == "PERMISSION" and answer.code == "too_many_attempts",
            "identify_contact: the conversation's limit did not stop an enumeration",
            answer.short(),
        )
        wait = answer.body.get("retry_after_seconds")
        check(isinstance(wait, int) and wait > 0, "too_many_attempts without its wait", wait)
        check(conversation.speaker is None, "an enumerating conversation was identified")

    @precondition(
        lambda self: any(
            c.speaker is not None and any(c.shown.get(k) for k in OWN_WRITE_OF)
            for c in self.oracle.conversations
        )
    )
    @rule(data=st.data())
    def reference_of_another_conversation(self, data: Any) -> None:
        """The customer's own reference, shown in another conversation of theirs, used in a new
        one: the owner check would let it through, so only the ledger stands in the way. It
        must answer reference_not_seen and act on nothing."""
        self.hit("reference_of_another_conversation")
        sources = [
            c
            for c in self.oracle.conversations
            if c.speaker is not None and any(c.shown.get(k) for k in OWN_WRITE_OF)
        ]
        source = data.draw(st.sampled_from(sources), label="shown in")
        kind = data.draw(st.sampled_from([k for k in OWN_WRITE_OF if source.shown.get(k)]))
        owned = [
            r
            for r in source.shown[kind]
            if r in self.oracle.entities and self.oracle.entities[r].owner == source.speaker
        ]
        if not owned:
            return
        reference = data.draw(st.sampled_from(owned), label="reference")
        conversation = self._conversation(source.tenant)
        identifier = source.speaker.document
        self.send(conversation, "identify_contact", {"document": identifier})
        if conversation.speaker != source.speaker:
            return  # refused or in verified mode: nobody to act for
        tool, argument = OWN_WRITE_OF[kind]
        arguments = {"identifier": identifier, argument: reference}
        if tool == "add_case_comment":
            arguments["message"] = "Sigue igual."
        answer = self.send(conversation, tool, arguments)
        check(
            answer.error_type == "VALIDATION" and answer.code == "reference_not_seen",
            f"{tool}: a reference shown only in another conversation was accepted",
            reference,
            answer.short(),
        )

    # --- rules: reads ---

    @rule(conversation=conversations, data=st.data())
    def read(self, conversation: Conversation, data: Any) -> None:
        """Every read tool, with arguments drawn as a careless model draws them."""
        tool = data.draw(st.sampled_from(sorted(READS - {"find_available_slots"})), label="read")
        self.hit(f"read:{tool}")
        if tool == "list_services":
            arguments: dict[str, Any] = {"limit": data.draw(st.integers(1, 50))}
        elif tool == "search_products":
            arguments = {"query": data.draw(st.sampled_from(["", "café", "taza", "zzz", "TAZ"]))}
        else:
            arguments = {"identifier": self.identifier(data, conversation)}
            if tool == "get_quote":
                arguments["quote"] = self.reference(data, conversation, "QT")
            elif tool == "get_case":
                arguments["case"] = self.reference(data, conversation, "CS")
        self.send(conversation, tool, arguments)

    @rule(conversation=conversations, data=st.data())
    def find_slots(self, conversation: Conversation, data: Any) -> None:
        """Free slots from a day the model picked: today, a few days on, in the past, at the
        horizon's edge or past it, on the spring-forward day, or no date at all; to move an
        appointment, naming it (any reference)."""
        self.hit("read:find_available_slots")
        arguments = {"service": SERVICE, "from": self.day(data, conversation)}
        if data.draw(st.booleans(), label="with to"):
            arguments["to"] = self.day(data, conversation)
        if conversation.shown.get("AP") and data.draw(st.booleans(), label="to move"):
            arguments["appointment"] = self.reference(data, conversation, "AP")
        arguments["limit"] = data.draw(st.integers(1, 20))
        self.send(conversation, "find_available_slots", arguments)

    # --- rules: writes ---

    @rule(conversation=conversations, data=st.data())
    def search_then_book(self, conversation: Conversation, data: Any) -> None:
        """What a well-behaved model does part of the time: search, then book what it saw
        (by reference or by its date and time), as the conversation's customer."""
        self.hit("search_then_book")
        tz = self.world.tenants[conversation.tenant].company.tz
        start = timezone.now().astimezone(tz).date() + timedelta(days=data.draw(st.integers(0, 6)))
        arguments = {"service": SERVICE, "from": start.isoformat(), "limit": 5}
        found = self.send(conversation, "find_available_slots", arguments)
        if found.is_error or not found.body["items"] or conversation.speaker is None:
            return
        item = data.draw(st.sampled_from(found.body["items"]), label="slot")
        given = item["slot"] if data.draw(st.booleans()) else f"{item['date']} {item['time']}"
        identifier = data.draw(st.sampled_from(self.spellings(conversation.speaker)))
        booking = {"identifier": identifier, "service": SERVICE, "slot": given}
        self.send(conversation, "book_appointment", booking)

    @rule(conversation=conversations, data=st.data())
    def agenda_write(self, conversation: Conversation, data: Any) -> None:
        tool = data.draw(
            st.sampled_from(
                [
                    "book_appointment",
                    "book_appointment",
                    "reschedule_appointment",
                    "cancel_appointment",
                ]
            )
        )
        self.hit(f"write:{tool}")
        arguments: dict[str, Any] = {"identifier": self.identifier(data, conversation)}
        if tool == "book_appointment":
            arguments["service"] = SERVICE
        for argument, kind in REFERENCE_ARGUMENT[tool]:
            arguments[argument] = self.reference(data, conversation, kind)
        self.send(conversation, tool, arguments)

    @rule(conversation=conversations, data=st.data())
    def sales_write(self, conversation: Conversation, data: Any) -> None:
        tool = data.draw(
            st.sampled_from(
                [
                    "create_quote",
                    "create_quote",
                    "accept_quote",
                    "reject_quote",
                    "request_sales_contact",
                ]
            )
        )
        self.hit(f"write:{tool}")
        arguments: dict[str, Any] = {"identifier": self.identifier(data, conversation)}
        if tool == "create_quote":
            arguments["items"] = self.items(data)
            real = quote_total([(i["sku"], i["quantity"]) for i in arguments["items"]])
            if (amount := self.amount(data, real)) is not None:
                arguments["expected_total"] = amount
        elif tool in ("accept_quote", "reject_quote"):
            arguments["quote"] = self.reference(data, conversation, "QT")
            entity = self.oracle.entities.get(arguments["quote"])
            if tool == "accept_quote":
                real = Decimal(entity.total) if entity is not None else None
                if (amount := self.amount(data, real)) is not None:
                    arguments["expected_total"] = amount
            elif data.draw(st.booleans(), label="reason"):
                arguments["reason"] = "Demasiado caro"
        else:
            arguments["topic"] = data.draw(st.sampled_from(["Reforma", "Pedido grande", "Ofertas"]))
        self.send(conversation, tool, arguments)

    @rule(conversation=conversations, data=st.data())
    def support_write(self, conversation: Conversation, data: Any) -> None:
        tool = data.draw(
            st.sampled_from(
                [
                    "open_case",
                    "open_case",
                    "add_case_comment",
                    "confirm_case_resolved",
                    "report_case_not_fixed",
                ]
            )
        )
        self.hit(f"write:{tool}")
        arguments: dict[str, Any] = {"identifier": self.identifier(data, conversation)}
        if tool == "open_case":
            arguments["subject"] = data.draw(st.sampled_from(["No enciende", "Factura", "Ruido"]))
            arguments["description"] = "Desde ayer no funciona."
            if conversation.shown.get("CS") and data.draw(st.booleans(), label="related"):
                arguments["related_case"] = self.reference(data, conversation, "CS")
        else:
            arguments["case"] = self.reference(data, conversation, "CS")
            if tool != "confirm_case_resolved":
                arguments["message"] = "Sigue igual."
        answer = self.send(conversation, tool, arguments)
        if answer.code == "possible_duplicate" and data.draw(st.booleans(), label="new case"):
            # The customer says it is another problem: the model says so explicitly.
            self.send(conversation, tool, {**arguments, "new_case": True})

    # --- rules: re-planning above the key ---

    @precondition(lambda self: any(c.last_done for c in self.oracle.conversations))
    @rule(data=st.data())
    def replan_with_a_fresh_key(self, data: Any) -> None:
        """The model re-plans (a timeout, a lost answer, a restart) instead of retrying: a
        request that succeeded, again under a fresh key, worded otherwise (the slot by its date
        and time, the lines in another order and split, the topic in other case and spacing,
        the case described again). While what it made stands, that is the answer
        (already_done, or possible_duplicate for a case), never a refusal such as "slot
        taken", and nothing is done twice: the oracle counts the records standing for each
        intent. Only the customer's identity or verification may stop it."""
        conversation = data.draw(
            st.sampled_from([c for c in self.oracle.conversations if c.last_done]),
            label="re-planning conversation",
        )
        tool, arguments, reference, intent = conversation.last_done
        self.hit(f"replan:{tool}")
        entity = self.oracle.entities.get(reference)
        # Still what the request made: not cancelled, rejected or resolved, nor moved since.
        standing = (
            entity is not None and entity.state in LIVE[entity.kind] and entity.intent == intent
        )
        answer = self.send(conversation, tool, self.reworded(data, conversation, tool, arguments))
        if not standing or answer.error_type == "PERMISSION":
            return
        if tool == "open_case":
            check(
                answer.code == "possible_duplicate",
                "open_case: a re-planned case was not a possible duplicate of the one it made",
                reference,
                answer.short(),
            )
        else:
            check(
                not answer.is_error and answer.body.get("already_done") is True,
                f"{tool}: a re-planned request was not answered with what it made",
                reference,
                answer.short(),
            )
            check(
                reference in (answer.body.get("appointment"), answer.body.get("reference")),
                f"{tool}: a re-planned request answered another record",
                reference,
                answer.short(),
            )

    def reworded(
        self, data: Any, conversation: Conversation, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """`arguments` as a model re-planning writes them: the same request, other words."""
        again = {
            k: v for k, v in arguments.items() if k not in ("new_case", "new_quote", "new_request")
        }
        speaker = conversation.speaker
        if speaker is not None and self.identified_as(conversation, arguments.get("identifier")):
            again["identifier"] = data.draw(
                st.sampled_from(self.spellings(speaker)), label="spelled again"
            )
        if "slot" in again and isinstance(again["slot"], str):
            resolved = conversation.resolve("SL", again["slot"])
            if len(resolved) == 1 and resolved[0] in conversation.labels:
                label = conversation.labels[resolved[0]]
                # By its date and time, unless another slot shown here has the same label.
                if conversation.resolve("SL", label) == resolved:
                    again["slot"] = data.draw(
                        st.sampled_from([resolved[0], label]), label="slot named"
                    )
        if tool == "create_quote":
            items = [dict(i) for i in reversed(again["items"])]
            split = [i for i in items if i["quantity"] > 1]
            if split and data.draw(st.booleans(), label="split a line"):
                split[0]["quantity"] -= 1
                items.append({"sku": split[0]["sku"].lower(), "quantity": 1})
            again["items"] = items
            if data.draw(st.booleans(), label="drop expected_total"):
                again.pop("expected_total", None)
        elif tool == "request_sales_contact":
            again["topic"] = f"  {again['topic'].upper()} ."
            again["notes"] = "Lo pidió otra vez."
        elif tool == "open_case":
            again["description"] = f"Como le dije: {again['description']}"
        return again

    @rule(conversation=conversations, data=st.data())
    def change_contact_details(self, conversation: Conversation, data: Any) -> None:
        """A new phone nobody has, another customer's phone, or a new email: answered alike,
        each with a code to the new value."""
        self.hit("write:update_contact_details")
        arguments = {"identifier": self.identifier(data, conversation)}
        choice = data.draw(st.sampled_from(["fresh phone", "taken phone", "fresh email"]))
        if choice == "fresh phone":
            arguments["phone"] = fresh_phone()
        elif choice == "taken phone":
            others = [c for c in self.customers[conversation.tenant] if c != conversation.speaker]
            arguments["phone"] = others[0].phone
        else:
            arguments["email"] = f"nuevo-{uuid.uuid4().hex[:8]}@example.com"
        self._ask_change(conversation, arguments)

    def _ask_change(self, conversation: Conversation, arguments: dict[str, Any]) -> Answer:
        """update_contact_details, then the code the new phone or email received, noted."""
        channel = "sms" if arguments.get("phone") else "email"
        mark = self.code_mark(channel) if channel in self.channels else 0
        answer = self.send(conversation, "update_contact_details", arguments)
        if not answer.is_error and channel in self.channels:
            field, value, _none = conversation.change
            code = self.read_code(conversation, channel, mark, to=value)
            check(code is not None, "a code answered sent never reached the new value")
            conversation.change = (field, value, code)
        return answer

    @rule(conversation=conversations, data=st.data())
    def confirm_change(self, conversation: Conversation, data: Any) -> None:
        """The code of the change right, wrong, the step-up code instead, or not digits."""
        choice = data.draw(st.sampled_from(["right", "right", "wrong", "step-up code", "abc"]))
        self.hit(f"confirm_contact_change:{choice}")
        change_code = (conversation.change and conversation.change[2]) or "123456"
        code = {
            "right": change_code,
            "wrong": f"{(int(change_code) + 1) % 10**6:06d}",
            "step-up code": conversation.code or "654321",
            "abc": "abc",
        }[choice]
        arguments = {"identifier": self.identifier(data, conversation), "code": code}
        self.send(conversation, "confirm_contact_change", arguments)

    @rule(conversation=conversations, data=st.data())
    def own_follow_up(self, conversation: Conversation, data: Any) -> None:
        """What a well-behaved model does with the customer's own records, so that the writes
        random draws rarely get right succeed too: list them, then move or cancel an
        appointment, comment on a case, confirm or reopen a resolved one (staff resolving it
        first when none is), or change the contact's details after a code."""
        if conversation.speaker is None:
            return
        what = data.draw(
            st.sampled_from(["move", "cancel", "comment", "resolved", "details"]),
            label="follow up",
        )
        self.hit(f"follow_up:{what}")
        identifier = conversation.speaker.document
        if what == "details":
            if self._verify(conversation):
                change = (
                    {"phone": fresh_phone()}
                    if data.draw(st.booleans(), label="phone")
                    else {"email": f"nuevo-{uuid.uuid4().hex[:8]}@example.com"}
                )
                asked = self._ask_change(conversation, {"identifier": identifier, **change})
                if not asked.is_error and conversation.change[2] is not None:
                    self.send(
                        conversation,
                        "confirm_contact_change",
                        {"identifier": identifier, "code": conversation.change[2]},
                    )
            return
        kind, tool, field = (
            ("AP", "list_my_appointments", "appointment")
            if what in ("move", "cancel")
            else ("CS", "list_my_cases", "reference")
        )
        listed = self.send(conversation, tool, {"identifier": identifier})
        if listed.is_error:
            return
        live = [i[field] for i in listed.body["items"] if i["state"] not in TERMINAL[kind]]
        if what == "resolved":
            resolved = [i["reference"] for i in listed.body["items"] if i["state"] == "resolved"]
            if not resolved and live:
                self._staff_resolve(self.oracle.entities[live[0]])
                resolved = [live[0]]
            live = resolved
        if not live:
            return
        reference = data.draw(st.sampled_from(live), label=kind)
        arguments = {"identifier": identifier, "appointment" if kind == "AP" else "case": reference}
        if what == "move":
            tz = self.world.tenants[conversation.tenant].company.tz
            start = timezone.now().astimezone(tz).date() + timedelta(
                days=data.draw(st.integers(0, 6))
            )
            found = self.send(
                conversation,
                "find_available_slots",
                {
                    "service": SERVICE,
                    "from": start.isoformat(),
                    "appointment": reference,
                    "limit": 5,
                },
            )
            if found.is_error or not found.body["items"]:
                return
            arguments["slot"] = data.draw(st.sampled_from(found.body["items"]), label="to")["slot"]
            self.send(conversation, "reschedule_appointment", arguments)
        elif what == "cancel":
            self.send(conversation, "cancel_appointment", arguments)
        elif what == "comment":
            self.send(conversation, "get_case", arguments)
            self.send(conversation, "add_case_comment", {**arguments, "message": "Sigue igual."})
        elif data.draw(st.booleans(), label="fixed"):
            self.send(conversation, "confirm_case_resolved", arguments)
        else:
            self.send(
                conversation, "report_case_not_fixed", {**arguments, "message": "Sigue igual."}
            )

    # --- rules: step-up codes ---

    @rule(conversation=conversations, data=st.data())
    def request_code(self, conversation: Conversation, data: Any) -> None:
        self.hit("request_verification_code")
        channel = data.draw(st.sampled_from(self.channels), label="channel")
        arguments = {"identifier": self.identifier(data, conversation), "channel": channel}
        mark = self.code_mark(channel)
        answer = self.send(conversation, "request_verification_code", arguments)
        if not answer.is_error:
            code = self.read_code(conversation, channel, mark)
            check(code is not None, "a code answered sent never reached the customer")
            conversation.code, conversation.code_spent, conversation.code_attempts = code, False, 0

    @rule(conversation=conversations, data=st.data())
    def verify(self, conversation: Conversation, data: Any) -> None:
        """The code right, wrong, after it expired, or again after it was used."""
        choice = data.draw(st.sampled_from(["right", "right", "wrong", "expired", "not digits"]))
        self.hit(f"verify_code:{choice}")
        code = conversation.code or "123456"
        if choice == "wrong":
            code = f"{(int(code) + 1) % 10**6:06d}"
        elif choice == "not digits":
            code = "abc"
        elif choice == "expired" and conversation.speaker is not None:
            # Time passes: the conversation's codes reach their expiry.
            VerificationChallenge.objects.filter(
                company=self.world.tenants[conversation.tenant].company,
                conversation__external_id=conversation.id,
            ).update(expires_at=timezone.now() - timedelta(seconds=1))
            conversation.code_spent = conversation.change_spent = True
        arguments = {"identifier": self.identifier(data, conversation), "code": code}
        self.send(conversation, "verify_code", arguments)

    # --- rules: keys reused, duplicates at once, bad arguments ---

    @precondition(lambda self: any(c.last_write for c in self.oracle.conversations))
    @rule(data=st.data())
    def replay_last_write(self, data: Any) -> None:
        """The same call again with its key: the first answer, byte for byte, no new effect."""
        self.hit("replay_last_write")
        conversation = data.draw(
            st.sampled_from([c for c in self.oracle.conversations if c.last_write])
        )
        tool, arguments, key = conversation.last_write
        self.send(conversation, tool, arguments, key=key)

    @precondition(lambda self: any(c.last_write for c in self.oracle.conversations))
    @rule(data=st.data())
    def reuse_key_other_arguments(self, data: Any) -> None:
        """The last key with another call: CONFLICT if it stored a success, else a fresh call."""
        self.hit("reuse_key_other_arguments")
        conversation = data.draw(
            st.sampled_from([c for c in self.oracle.conversations if c.last_write])
        )
        key = conversation.last_write[2]
        tool, arguments = self.write_call(data, conversation)
        self.send(conversation, tool, arguments, key=key)

    @rule(conversation=conversations, data=st.data())
    def concurrent_duplicate(self, conversation: Conversation, data: Any) -> None:
        """The model emits one call twice in one turn: two threads, one key, at once."""
        self.hit("concurrent_duplicate")
        tool, arguments = self.write_call(data, conversation)
        key = self.key()
        send = lambda: self.transport.call(  # noqa: E731
            conversation.tenant, conversation.id, tool, arguments, key=key
        )
        first, second = self.transport.together(send, send)
        successes = [a for a in (first, second) if not a.is_error]
        for answer in (first, second):
            self.oracle.answer_shape(conversation, tool, answer)
            self.oracle.fresh_key_errors(tool, answer, contended=True)
        if len(successes) == 2:
            check(first.text == second.text, f"{tool}: two answers to one key differ")
        leader = successes[0] if successes else first
        if leader.code != "request_in_progress":
            self.expect(conversation, tool, arguments, leader)
            self.oracle.store(conversation.tenant, tool, arguments, key, leader)
        conversation.last_write = (tool, arguments, key)

    @rule(conversation=conversations, data=st.data())
    def bad_arguments_then_corrected(self, conversation: Conversation, data: Any) -> None:
        """Arguments the schema refuses are a VALIDATION result listing them, storing
        nothing: the same key then carries the corrected call."""
        self.hit("bad_arguments_then_corrected")
        tool, arguments = self.write_call(data, conversation)
        broken = dict(arguments)
        how = data.draw(st.sampled_from(["unknown argument", "wrong type", "missing"]))
        if how == "unknown argument":
            broken["customer_id"] = 7
        elif how == "wrong type":
            broken[next(iter(broken))] = ["not", "text"]
        else:
            broken.pop(next(iter(broken)))
        key = self.key()
        answer = self.send(conversation, tool, broken, key=key)
        check(
            answer.error_type == "VALIDATION" and answer.code == "invalid_arguments",
            f"{tool}: bad arguments not answered invalid_arguments",
            how,
            answer.short(),
        )
        check(answer.body.get("problems"), f"{tool}: invalid_arguments without its problems")
        self.send(conversation, tool, arguments, key=key)

    # --- rules: staff, races ---

    @precondition(lambda self: any(e.kind == "CS" for e in self.oracle.entities.values()))
    @rule(data=st.data())
    def staff_resolves_a_case(self, data: Any) -> None:
        """Staff (in the admin) resolve a case, so the customer can confirm or reopen it."""
        self.hit("staff_resolves_a_case")
        open_ = [e for e in self.oracle.entities.values() if e.kind == "CS" and e.state != "closed"]
        if not open_:
            return
        self._staff_resolve(data.draw(st.sampled_from(sorted(open_, key=lambda e: e.reference))))

    def _staff_resolve(self, entity: Entity) -> None:
        case = Case.objects.get(reference=entity.reference)
        if case.state == "open":
            case = case_start(case=case)
        if case.state in ("in_progress", "waiting_customer"):
            case = case_resolve(case=case)
        entity.state = case.state

    @rule(data=st.data())
    def stock_race(self, data: Any) -> None:
        """Two customers of one company accept quotes for the last mugs at the same instant."""
        self.hit("stock_race")
        tenant = data.draw(st.sampled_from(["A", "B"]), label="race in")
        pair = []
        for customer in self.customers[tenant]:
            conversation = self._conversation(tenant)
            self.send(conversation, "identify_contact", {"document": customer.document})
            quantity = data.draw(st.integers(1, 3), label="mugs")
            quote = self._verified_quote(conversation, [{"sku": "TAZ-002", "quantity": quantity}])
            if quote is None:
                return
            pair.append((conversation, quote))

        calls = [
            (
                conversation,
                self.key(),
                {"identifier": conversation.speaker.document, "quote": quote},
            )
            for conversation, quote in pair
        ]
        answers = self.transport.together(
            *[
                (lambda c=c, k=k, a=a: self.transport.call(tenant, c.id, "accept_quote", a, key=k))
                for c, k, a in calls
            ]
        )
        for (conversation, key_, arguments), answer in zip(calls, answers, strict=True):
            self.judge(conversation, "accept_quote", arguments, key_, answer)
            conversation.last_write = ("accept_quote", arguments, key_)

    def _verify(self, conversation: Conversation) -> bool:
        """A code requested by SMS and given right, as the customer would: whether it verified
        (the request may be refused: too many codes, a broker down)."""
        identifier = conversation.speaker.document if conversation.speaker else "?"
        mark = self.code_mark("sms")
        sent = self.send(
            conversation, "request_verification_code", {"identifier": identifier, "channel": "sms"}
        )
        if sent.is_error:
            return False
        code = self.read_code(conversation, "sms", mark)
        check(code is not None, "a code answered sent never reached the customer")
        conversation.code, conversation.code_spent, conversation.code_attempts = code, False, 0
        verified = self.send(conversation, "verify_code", {"identifier": identifier, "code": code})
        check(not verified.is_error, "the right fresh code did not verify", verified.short())
        return True

    def _verified_quote(self, conversation: Conversation, items: list[dict]) -> str | None:
        identifier = conversation.speaker.document if conversation.speaker else "?"
        if not self._verify(conversation):
            return None
        quote = self.send(conversation, "create_quote", {"identifier": identifier, "items": items})
        if quote.is_error:
            # The stock an earlier race left may not cover it: refused when created, too.
            check(quote.code == "insufficient_stock", "a quote was refused", quote.short())
            return None
        return quote.body["reference"]

    # --- rules: faults, each followed by the Gateway's retry ---

    @rule(conversation=conversations, data=st.data())
    def database_down_then_retry(self, conversation: Conversation, data: Any) -> None:
        """The database fault switch on one call (SYSTEM), then the same call, same key."""
        self.hit("fault:database")
        if data.draw(st.booleans(), label="a read"):
            self.send(conversation, "list_services", {}, fault="database")
            self.send(conversation, "list_services", {})
            return
        tool, arguments = self.write_call(data, conversation)
        key = self.key()
        self.send(conversation, tool, arguments, key=key, fault="database")
        self.send(conversation, tool, arguments, key=key)

    @precondition(lambda self: self.transport.in_process)
    @rule(conversation=conversations, data=st.data())
    def broker_down_then_retry(self, conversation: Conversation, data: Any) -> None:
        """The broker unreachable while a code is requested (SYSTEM), then the retry."""
        self.hit("fault:broker")
        arguments = {"identifier": self.identifier(data, conversation), "channel": "sms"}
        key = self.key()
        with self.broker_down():
            answer = self.transport.call(
                conversation.tenant,
                conversation.id,
                "request_verification_code",
                arguments,
                key=key,
            )
        self.oracle.fault_injected = True
        self.oracle.answer_shape(conversation, "request_verification_code", answer)
        self.oracle.fault_injected = False
        if answer.is_error and answer.error_type == "SYSTEM":
            check(
                answer.code == "delivery_unavailable",
                "broker down: not delivery_unavailable",
                answer.text,
            )
        else:
            # Refused before any code was made (not identified, limits): as without a fault.
            self.judge(conversation, "request_verification_code", arguments, key, answer)
            return
        mark = self.code_mark("sms")
        retried = self.send(conversation, "request_verification_code", arguments, key=key)
        if not retried.is_error:
            code = self.read_code(conversation, "sms", mark)
            check(code is not None, "a code answered sent never reached the customer")
            conversation.code, conversation.code_spent, conversation.code_attempts = code, False, 0

    @contextlib.contextmanager
    def broker_down(self) -> Iterator[None]:
        from config.celery import app
        from tests.servers import _point_publisher, free_port

        saved = _point_publisher(
            f"redis://127.0.0.1:{free_port()}/15", eager=False, queue=app.conf.task_default_queue
        )
        try:
            yield
        finally:
            _point_publisher(saved[0], eager=saved[1], queue=saved[2])

    @rule(conversation=conversations, data=st.data())
    def lock_timeout_then_retry(self, conversation: Conversation, data: Any) -> None:
        """A twin holds the key (its transaction open past the lock timeout): CONFLICT
        request_in_progress, retryable; once the twin is gone, the retry runs."""
        self.hit("fault:lock_timeout")
        tool, arguments = self.write_call(data, conversation)
        key = self.key()
        with self.key_held(conversation.tenant, key):
            answer = self.transport.call(
                conversation.tenant, conversation.id, tool, arguments, key=key
            )
            self.oracle.answer_shape(conversation, tool, answer)
            check(
                answer.code == "request_in_progress" and "retry_after_seconds" in answer.body,
                f"{tool}: a held key was not request_in_progress",
                answer.short(),
            )
        self.send(conversation, tool, arguments, key=key)

    @contextlib.contextmanager
    def key_held(self, tenant: str, key: str) -> Iterator[None]:
        """Another connection inserts the key's record and keeps its transaction open."""
        inserted, release = threading.Event(), threading.Event()
        failure: list[BaseException] = []

        def hold() -> None:
            try:
                with transaction.atomic():
                    now = timezone.now()
                    IdempotencyRecord.objects.create(
                        company=self.world.tenants[tenant].company,
                        key=key,
                        operation="held",
                        fingerprint="0" * 64,
                        created_at=now,
                        replay_until=now + timedelta(days=7),
                        expires_at=now + timedelta(days=8),
                    )
                    inserted.set()
                    release.wait(timeout=60)
                    transaction.set_rollback(True)
            except BaseException as error:
                failure.append(error)
                inserted.set()
            finally:
                connection.close()

        holder = threading.Thread(target=hold)
        holder.start()
        inserted.wait(timeout=30)
        try:
            if failure:
                raise failure[0]
            yield
        finally:
            release.set()
            holder.join(timeout=60)

    @precondition(lambda self: self.transport.in_process)
    @rule(conversation=conversations, data=st.data())
    def worker_killed_then_retry(self, conversation: Conversation, data: Any) -> None:
        """The process dies after the effect ran, before its transaction committed: no
        answer, no effect; the Gateway's retry with the same key runs it once."""
        self.hit("fault:worker_killed")
        tool, arguments = self.write_call(data, conversation)
        key = self.key()
        table = IdempotencyRecord._meta.db_table

        def die(execute, sql, params, many, context):
            # The stored answer's UPDATE, alone or after the writes sent with it (a WITH).
            if f'UPDATE "{table}" SET' in sql:
                raise WorkerKilled
            return execute(sql, params, many, context)

        try:
            with connection.execute_wrapper(die):
                answer = self.transport.call(
                    conversation.tenant, conversation.id, tool, arguments, key=key
                )
        except WorkerKilled:
            pass
        else:
            # Refused before any effect (no record to store): judged as an ordinary call.
            check(answer.is_error, f"{tool}: answered although its worker died")
            self.judge(conversation, tool, arguments, key, answer)
        self.oracle.invariants()
        self.send(conversation, tool, arguments, key=key)

    # --- after every step ---

    @invariant()
    def guarantees_hold(self) -> None:
        self.oracle.invariants()
