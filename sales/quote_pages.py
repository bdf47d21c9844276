"""Quote pages: the customer reads a sent quote from its email and accepts or rejects it.

A sent quote's email links to a page with its lines, totals and validity (sales.quote_links:
the link; sales.quote_views: the pages).

Accepting and rejecting go through the agent's services, `quote_accept` and `quote_reject`,
as the customer, exactly as the tools `accept_quote` and `reject_quote` do: the company's
step-up policy (core.identity) decides whether a code is needed, asked after the quote's own
checks (a quote that cannot be accepted says why without sending a code); the code goes to the
customer's own registered phone or email (core.verification), through the link's own
conversation (core.customer_links.link_conversation); acceptance reserves the stock. Each
submitted form runs once under the idempotency engine.
"""

from typing import Any

from core.customer_links import form_idempotency_key, link_conversation, link_digest
from core.idempotency import idempotent_execute
from core.identity import require_step_up
from core.models import Conversation, VerificationChallenge
from core.verification import challenge_issue, challenge_verify
from sales.quote_links import QuoteTarget
from sales.services import quote_accept, quote_reject

MAX_REASON = 300
# The tools whose step-up policy the page's actions follow.
ACTIONS = {"accept": "accept_quote", "reject": "reject_quote"}


def _conversation(target: QuoteTarget) -> Conversation:
    quote = target.quote
    return link_conversation(company=quote.company, contact=quote.contact, key=target.key)


def _run_once(target: QuoteTarget, nonce: str, operation: str, request: dict, effect) -> dict:
    return idempotent_execute(
        company=target.quote.company,
        key=form_idempotency_key(nonce),
        operation=operation,
        request={"link": link_digest(target.key), **request},
        effect=effect,
    ).body


def quote_page_accept(target: QuoteTarget, *, nonce: str) -> dict[str, Any]:
    """Accept the link's quote as its customer, once per form: PermissionRefused
    `verification_required` when the company's policy asks a code for `accept_quote` and the
    link's conversation is not verified (after the quote's own checks, as the tool)."""
    quote = target.quote
    conversation = _conversation(target)

    def effect() -> tuple[dict[str, Any], int]:
        quote_accept(
            quote=quote,
            contact=quote.contact,
            authorize=lambda: require_step_up(conversation=conversation, action=ACTIONS["accept"]),
        )
        return {"done": "accepted"}, 200

    return _run_once(target, nonce, "sales.link.accept", {}, effect)


def quote_page_reject(target: QuoteTarget, *, nonce: str, reason: str) -> dict[str, Any]:
    """Reject the link's quote as its customer, once per form; a code first when the policy
    lists `reject_quote`, as for the tool."""
    quote = target.quote
    reason = " ".join(reason.split())[:MAX_REASON]
    conversation = _conversation(target)

    def effect() -> tuple[dict[str, Any], int]:
        require_step_up(conversation=conversation, action=ACTIONS["reject"])
        quote_reject(quote=quote, reason=reason, contact=quote.contact)
        return {"done": "rejected"}, 200

    return _run_once(target, nonce, "sales.link.reject", {"reason": reason}, effect)


def quote_page_code_send(target: QuoteTarget, *, channel: str = "") -> VerificationChallenge:
    """Send a step-up code to the customer's own registered phone (else email), or the one
    asked for, as request_verification_code does: within its send limits."""
    contact = target.quote.contact
    if not channel:
        channels = VerificationChallenge.Channel
        channel = channels.SMS if contact.phone else channels.EMAIL
    return challenge_issue(contact=contact, channel=channel, conversation=_conversation(target))


def quote_page_code_check(target: QuoteTarget, *, code: str) -> None:
    """Check a code as verify_code does: the link's conversation is then verified for a short
    time. Each guess takes one of the code's attempts; the last wrong one locks it."""
    challenge_verify(conversation=_conversation(target), contact=target.quote.contact, code=code)
