"""Step-up verification codes: sent to a contact's own channel, checked once, never readable.

Codes are six digits from `secrets`, valid for ten minutes, single use, at most five tries.
Only an HMAC of the code (keyed from SECRET_KEY, bound to the challenge's nonce and the
contact) is stored, and compared in constant time (core.verification.codes). The code
travels to the Celery worker sealed with a one-time pad derived the same way, so neither the
broker nor a log line ever holds it in clear; only the message to the customer does.

A company may send a one-tap link instead of the code, or beside it, per channel
(core.verification.links): tapping it answers the challenge as its right code would
(core.verification.check.challenge_answer_by_link), so no secret passes through the chat.

Issuing (core.verification.issue), checking (core.verification.check) and delivering
(core.verification.delivery) each have their module; a customer's confirmation of one action
(core.verification.confirmation) is a code of its own purpose, bound to that action. Every
write that must survive the failing call that caused it (an attempt counted, a lock, a
challenge marked not sent) goes through core.durable. Callers outside core import these
names from here; core's own modules import them from the module that defines them.
"""

from core.verification.check import (
    LinkAnswer,
    challenge_answer_by_link,
    challenge_verify,
    link_answer_register,
)
from core.verification.codes import seal_code
from core.verification.confirmation import ConfirmedAction, confirmation_require
from core.verification.delivery import (
    DELIVERY_SETTLE_GRACE,
    DeliveryOutcome,
    SentUnrecorded,
    challenge_deliver_once,
    challenge_deliveries_settle,
    challenge_delivery_record_sent,
)
from core.verification.issue import challenge_issue, challenge_resend, challenge_revoke
from core.verification.links import verification_link_url

__all__ = [
    "DELIVERY_SETTLE_GRACE",
    "ConfirmedAction",
    "DeliveryOutcome",
    "LinkAnswer",
    "SentUnrecorded",
    "challenge_answer_by_link",
    "challenge_deliver_once",
    "challenge_deliveries_settle",
    "challenge_delivery_record_sent",
    "challenge_issue",
    "challenge_resend",
    "challenge_revoke",
    "challenge_verify",
    "confirmation_require",
    "link_answer_register",
    "seal_code",
    "verification_link_url",
]
