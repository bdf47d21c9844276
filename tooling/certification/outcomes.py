"""Check 7: no results, missing data, bad arguments and an outage each get their own answer."""

from core.errors import ErrorType
from tooling.certification.answers import invented_reference
from tooling.certification.scenario import Scenario
from tooling.certification.verdicts import (
    verdict_empty_list,
    verdict_error,
    verdict_error_shapes,
    verdict_names_field,
    verdict_success,
)


async def outcomes(s: Scenario) -> None:
    await search_that_finds_nothing(s)
    await ask_for_missing_data(s)
    await identify_a_stranger(s)
    await send_a_bad_argument(s)
    await write_during_an_outage(s)
    judge_every_error(s)


async def search_that_finds_nothing(s: Scenario) -> None:
    with s.probe(
        7, "no results: search_products", "a search that finds nothing is a success"
    ) as row:
        attempt = await s.gw.call(
            s.a1, "search_products", {"query": f"zzz certificación {s.run_id}"}
        )
        s.judge(row, verdict_empty_list(attempt), attempt)


async def ask_for_missing_data(s: Scenario) -> None:
    """A quote that exists nowhere and a service the company does not offer."""
    for tool, args in (
        ("get_quote", {"identifier": s.ana.identifier, "quote": invented_reference("QT")}),
        (
            "find_available_slots",
            {"service": f"Servicio inexistente {s.run_id}", "from": "mañana"},
        ),
    ):
        with s.probe(
            7, f"missing data: {tool}", "something that does not exist is NOT_FOUND"
        ) as row:
            attempt = await s.gw.call(s.a1, tool, args)
            s.judge(row, verdict_error(attempt, ErrorType.NOT_FOUND), attempt)


async def identify_a_stranger(s: Scenario) -> None:
    with s.probe(
        7,
        "missing data: identify_contact",
        "an unknown customer is NOT_FOUND, not an error of the system",
    ) as row:
        attempt = await s.gw.call(
            s.conversation("stranger"),
            "identify_contact",
            {"email": f"nadie-{s.run_id}@example.com"},
        )
        s.judge(row, verdict_error(attempt, ErrorType.NOT_FOUND), attempt)


async def send_a_bad_argument(s: Scenario) -> None:
    with s.probe(
        7,
        "bad arguments: list_services",
        "an argument outside the tool's schema is VALIDATION naming it, for the model to fix",
    ) as row:
        attempt = await s.gw.call(s.a1, "list_services", {"limit": 0})
        s.judge(row, verdict_names_field(attempt, "limit"), attempt)


async def write_during_an_outage(s: Scenario) -> None:
    """A write while the database is down is SYSTEM; its retry with the same key (check 1)
    runs for real, because only successes are stored."""
    outage = s.conversation("outage")
    args = {"document": s.ana.document_number}
    with s.probe(
        7, "dependency down on a write: identify_contact", "an outage during a write is SYSTEM"
    ) as row:
        down = await s.gw.call(outage, "identify_contact", args, fault="database")
        s.judge(row, verdict_error(down, ErrorType.SYSTEM), down)
    with s.probe(
        1,
        "same key after a failure: identify_contact",
        "only successes are stored: the retry of a call that failed runs for real",
    ) as row:
        retry = await s.gw.call(outage, "identify_contact", args)
        s.judge(
            row,
            verdict_success(retry),
            retry,
            sent=f"{retry.sent()} (same key as the SYSTEM failure)",
        )


def judge_every_error(s: Scenario) -> None:
    with s.probe(
        7,
        "every error: canonical type and a user_message",
        "each of the six types, with a message for the customer",
    ) as row:
        errors = [e for e in s.gw.exchanges if e.is_error]
        s.judge(row, verdict_error_shapes(errors), sent=f"{len(errors)} error answers of this run")
