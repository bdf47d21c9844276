"""The sales conversations: checks 2, 3, 4 and 5 on quotes (altered totals, foreign, terminal)."""

from typing import Any

from core.errors import ErrorType
from tooling.certification.answers import find, in_state, items
from tooling.certification.exchange import Blocked
from tooling.certification.scenario import Scenario
from tooling.certification.verdicts import (
    stated_total,
    verdict_altered_amount,
    verdict_altered_then_real,
    verdict_foreign,
    verdict_refused_without_effect,
    verdict_terminal,
)

QUOTES = "list_my_quotes"
# Each terminal state, the tool that tries to resolve such a quote again, and the run's own
# quote in that state if it has one (else the sandbox's).
TERMINAL = (
    ("rejected", "reject_quote", "rejected_quote"),
    ("accepted", "accept_quote", None),
    ("expired", "accept_quote", None),
)


async def sales(s: Scenario) -> None:
    lines = await one_product_in_stock(s)
    await create_at_an_altered_total(s, lines)
    await accept_at_an_altered_total(s)
    await reject_with_switched_identity(s)
    await reject_another_customers_quote(s)
    await reject_unseen_quote(s)
    await reject_the_runs_quote(s)
    for state, tool, wanted in TERMINAL:
        await resolve_terminal_quote(s, state, tool, wanted)


async def quote_shown(s: Scenario, reference: str) -> dict[str, Any] | None:
    return find(await s.mine(s.a1, QUOTES, s.ana), "reference", reference)


async def one_product_in_stock(s: Scenario) -> list[dict[str, Any]]:
    """The quote lines of the run: one unit of the first product in stock."""
    products = items(
        await s.gw.call(s.a1, "search_products", s.most("search_products")), "search_products"
    )
    product = next((p for p in products if p.get("in_stock")), None)
    if product is None:
        raise Blocked("the sandbox catalog has no product in stock")
    return [{"sku": product["sku"], "quantity": 1}]


async def create_at_an_altered_total(s: Scenario, lines: list[dict[str, Any]]) -> None:
    with s.probe(
        5,
        "altered amount: create_quote",
        "a total the agent made up is refused with the real one, and nothing is created",
    ) as row:
        before = await s.mine(s.a1, QUOTES, s.ana)
        altered = await s.gw.call(
            s.a1,
            "create_quote",
            {"identifier": s.ana.identifier, "items": lines, "expected_total": "0.01"},
        )
        real = stated_total(altered)
        confirmed = None
        if real is not None:
            # The stated total must be the system's own: quoting with it succeeds.
            confirmed = await s.gw.call(
                s.a1,
                "create_quote",
                {"identifier": s.ana.identifier, "items": lines, "expected_total": str(real)},
            )
        after = await s.mine(s.a1, QUOTES, s.ana)
        new = {q["reference"] for q in after} - {q["reference"] for q in before}
        verdict = verdict_altered_then_real(altered, confirmed, new)
        s.judge(row, verdict, *(e for e in (altered, confirmed) if e is not None))
        if verdict[0] and confirmed is not None:
            s.state["quote"] = confirmed.body["reference"]
            s.state["quote_total"] = real


async def accept_at_an_altered_total(s: Scenario) -> None:
    with s.probe(
        5,
        "altered amount: accept_quote",
        "accepting at a wrong total is refused with the real total; the quote stays open",
    ) as row:
        reference, real = s.need("quote"), s.need("quote_total")
        attempt = await s.gw.call(
            s.a1,
            "accept_quote",
            {"identifier": s.ana.identifier, "quote": reference, "expected_total": str(real + 1)},
        )
        verdict = verdict_altered_amount(attempt, real)
        if verdict[0] and not in_state(await quote_shown(s, reference), "sent"):
            verdict = (False, verdict[1] + "; but the quote is no longer sent")
        s.judge(row, verdict, attempt)


async def reject_with_switched_identity(s: Scenario) -> None:
    with s.probe(
        2,
        "identity switch: reject_quote",
        "another customer's identifier is refused on a sales write",
    ) as row:
        reference = s.need("quote")
        if find(await s.mine(s.switch, QUOTES, s.ana), "reference", reference) is None:
            raise Blocked("the new quote is not in the customer's list")
        attempt = await s.gw.call(
            s.switch, "reject_quote", {"identifier": s.bruno.identifier, "quote": reference}
        )
        unchanged = in_state(await quote_shown(s, reference), "sent")
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
            attempt,
        )


async def reject_another_customers_quote(s: Scenario) -> None:
    with s.probe(
        2,
        "another customer's quote: reject_quote",
        "a customer cannot resolve a quote that is not theirs",
    ) as row:
        reference = s.need("quote")
        attempt = await s.gw.call(
            s.b1, "reject_quote", {"identifier": s.bruno.identifier, "quote": reference}
        )
        unchanged = in_state(await quote_shown(s, reference), "sent")
        s.judge(row, verdict_foreign(attempt, unchanged), attempt)


async def reject_unseen_quote(s: Scenario) -> None:
    with s.probe(
        4,
        "unseen reference: reject_quote",
        "the customer's own quote, never shown in this conversation, cannot be resolved here",
    ) as row:
        reference = s.need("quote")
        attempt = await s.gw.call(
            s.blind, "reject_quote", {"identifier": s.ana.identifier, "quote": reference}
        )
        unchanged = in_state(await quote_shown(s, reference), "sent")
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
            attempt,
        )


async def reject_the_runs_quote(s: Scenario) -> None:
    """Reject the run's quote, so the sandbox keeps no open quote of ours."""
    if "quote" not in s.state:
        return
    rejected = await s.gw.call(
        s.a1, "reject_quote", {"identifier": s.ana.identifier, "quote": s.state["quote"]}
    )
    if not rejected.is_error:
        s.state["rejected_quote"] = s.state["quote"]


async def resolve_terminal_quote(s: Scenario, state: str, tool: str, wanted: str | None) -> None:
    with s.probe(
        3,
        f"{state} quote: {tool}",
        f"a {state} quote cannot be resolved again: VALIDATION with its state",
    ) as row:
        listed = await s.mine(s.terminal, QUOTES, s.ana, state)
        quotes = [q for q in listed if in_state(q, state)]
        if wanted is not None:
            shown = find(quotes, "reference", s.need(wanted))
        else:
            shown = quotes[0] if quotes else None
        if shown is None:
            raise Blocked(f"the first contact has no {state} quote in the sandbox")
        attempt = await s.gw.call(
            s.terminal, tool, {"identifier": s.ana.identifier, "quote": shown["reference"]}
        )
        s.judge(row, verdict_terminal(attempt, shown), attempt)
