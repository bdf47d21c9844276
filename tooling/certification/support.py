"""The support conversations: checks 1 (simultaneous duplicates), 2, 3 and 4 on cases."""

import anyio

from core.errors import ErrorType
from tooling.certification.answers import find, in_state
from tooling.certification.exchange import IDEMPOTENCY_KEY, Blocked, Exchange
from tooling.certification.scenario import Scenario
from tooling.certification.verdicts import (
    verdict_error,
    verdict_foreign,
    verdict_once,
    verdict_refused_without_effect,
    verdict_terminal,
)

CASES = "list_my_cases"


async def support(s: Scenario) -> None:
    case = await open_case(s)
    await comment_twice_at_once(s, case)
    await comment_with_switched_identity(s, case)
    await comment_on_another_customers_case(s, case)
    await read_another_customers_case(s, case)
    await comment_on_unseen_case(s, case)
    await comment_on_closed_case(s)


async def messages_with(s: Scenario, case: str, text: str) -> int:
    """How many messages of the case, as the first customer reads it, carry exactly `text`."""
    shown = await s.gw.call(s.a1, "get_case", {"identifier": s.ana.identifier, "case": case})
    if shown.is_error or not isinstance(shown.body, dict):
        raise Blocked(f"get_case failed: {shown.got()}")
    return sum(1 for m in shown.body.get("messages", []) if m.get("text") == text)


async def open_case(s: Scenario) -> str:
    """The reference of the first customer's first open case."""
    listed = await s.mine(s.a1, CASES, s.ana, "open")
    open_cases = [c for c in listed if in_state(c, "open")]
    if not open_cases:
        raise Blocked("the first contact has no open case in the sandbox")
    return open_cases[0]["reference"]


async def comment_twice_at_once(s: Scenario, case: str) -> None:
    with s.probe(
        1,
        "same key twice at once: add_case_comment",
        "two simultaneous calls with one key (a double emission in one turn) add one "
        "message and answer the same",
    ) as row:
        message = f"Mensaje de certificación {s.run_id}"
        comment = {"identifier": s.ana.identifier, "case": case, "message": message}
        before = await messages_with(s, case, message)
        answers: list[Exchange] = []

        async def send() -> None:
            answers.append(await s.gw.call(s.a1, "add_case_comment", comment))

        async with anyio.create_task_group() as group:
            group.start_soon(send)
            group.start_soon(send)
        after = await messages_with(s, case, message)
        s.judge(
            row,
            verdict_once(answers[0], answers[1], before, after),
            sent=f"{answers[0].sent()} twice at once with the same {IDEMPOTENCY_KEY}",
        )


async def comment_with_switched_identity(s: Scenario, case: str) -> None:
    with s.probe(
        2,
        "identity switch: add_case_comment",
        "another customer's identifier is refused on a support write",
    ) as row:
        if find(await s.mine(s.switch, CASES, s.ana), "reference", case) is None:
            raise Blocked("the open case is not in the customer's list")
        message = f"Cambio de identidad {s.run_id}"
        attempt = await s.gw.call(
            s.switch,
            "add_case_comment",
            {"identifier": s.bruno.identifier, "case": case, "message": message},
        )
        unchanged = await messages_with(s, case, message) == 0
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
            attempt,
        )


async def comment_on_another_customers_case(s: Scenario, case: str) -> None:
    with s.probe(
        2,
        "another customer's case: add_case_comment",
        "a customer cannot write on a case that is not theirs",
    ) as row:
        message = f"Caso ajeno {s.run_id}"
        attempt = await s.gw.call(
            s.b1,
            "add_case_comment",
            {"identifier": s.bruno.identifier, "case": case, "message": message},
        )
        unchanged = await messages_with(s, case, message) == 0
        s.judge(row, verdict_foreign(attempt, unchanged), attempt)


async def read_another_customers_case(s: Scenario, case: str) -> None:
    with s.probe(
        2,
        "another customer's case: get_case",
        "a read of another customer's case by its exact reference shows nothing of it",
    ) as row:
        attempt = await s.gw.call(
            s.b1, "get_case", {"identifier": s.bruno.identifier, "case": case}
        )
        s.judge(row, verdict_error(attempt, ErrorType.PERMISSION, ErrorType.NOT_FOUND), attempt)


async def comment_on_unseen_case(s: Scenario, case: str) -> None:
    with s.probe(
        4,
        "unseen reference: add_case_comment",
        "the customer's own case, never shown in this conversation, takes no message here",
    ) as row:
        message = f"Referencia no vista {s.run_id}"
        attempt = await s.gw.call(
            s.blind,
            "add_case_comment",
            {"identifier": s.ana.identifier, "case": case, "message": message},
        )
        unchanged = await messages_with(s, case, message) == 0
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
            attempt,
        )


async def comment_on_closed_case(s: Scenario) -> None:
    with s.probe(
        3,
        "closed case: add_case_comment",
        "a closed case is not reopened by a message: VALIDATION with its state",
    ) as row:
        listed = await s.mine(s.terminal, CASES, s.ana, "closed")
        closed = [c for c in listed if in_state(c, "closed")]
        if not closed:
            raise Blocked("the first contact has no closed case in the sandbox")
        attempt = await s.gw.call(
            s.terminal,
            "add_case_comment",
            {"identifier": s.ana.identifier, "case": closed[0]["reference"], "message": "Hola"},
        )
        s.judge(row, verdict_terminal(attempt, closed[0]), attempt)
