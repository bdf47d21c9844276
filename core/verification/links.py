"""A verification's one-tap link: its key, its URL, and the challenge a tapped link names.

A challenge sent as a link (the company's setting per channel, Company.VerificationForm) is
answered by tapping the link on the customer's phone instead of reading a code into the chat,
so that no secret passes through the model, the agent platform or their logs. The link is the
customer pages' kind (core.customer_links): a key and its HMAC tag, 40 URL-safe characters.

The key is not drawn and stored: it is derived from the challenge's nonce with SECRET_KEY, as
the code's seal is (core.verification.codes), so the delivery task rebuilds it from the
challenge id it already gets (no key in a task message or a log line) and the row keeps only
a SHA-256 of it (`link_digest`), to find the challenge by. A row or a backup holds no working
link; the link is single-use, expires with the code and is bound to its challenge, and so to
one conversation and one channel.
"""

import hashlib

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils.crypto import salted_hmac

from core.customer_links import form_idempotency_key, link_digest, link_key, link_token
from core.idempotency import idempotent_execute
from core.models import VerificationChallenge
from core.verification.check import challenge_answer_by_link

PURPOSE = "verification"
_KEY_CHARS = 24  # as core.customer_links.link_key_new: 144 bits, URL-safe


def verification_link_key(nonce: str) -> str:
    """The link key of the challenge with this nonce."""
    digest = salted_hmac("garante.verification.link", nonce, algorithm="sha256").digest()
    return signing.b64_encode(digest).decode()[:_KEY_CHARS]


def verification_link_digest(key: str) -> str:
    """What the challenge's row keeps of its link's key."""
    return hashlib.sha256(key.encode()).hexdigest()


def verification_link_url(challenge: VerificationChallenge) -> str:
    """The challenge's link ("" without the site's public address)."""
    base = settings.GARANTE_PUBLIC_URL
    if not base:
        return ""
    token = link_token(verification_link_key(challenge.nonce), PURPOSE)
    return base + reverse("verification_link", args=[token])


def verification_link_challenge(key: str) -> VerificationChallenge | None:
    """The challenge a link's key names (whatever its state), with its company, contact and
    conversation, or None."""
    return (
        VerificationChallenge.objects.select_related("company", "contact", "conversation")
        .filter(link_digest=verification_link_digest(key))
        .first()
    )


def verification_link_key_of(token: str) -> str | None:
    """The key a link's token carries, or None for an altered or made-up token."""
    return link_key(token, PURPOSE)


def verification_link_answer(*, challenge: VerificationChallenge, key: str, nonce: str) -> dict:
    """Answer the challenge by its link (core.verification.check.challenge_answer_by_link),
    once per submitted form: the POST of the link's page runs under the idempotency engine
    with the form's one-time nonce as its key, so a double submit replays the first answer
    and verifies nothing twice. Another form of the same link (a second tab) finds the
    challenge used: ValidationFailed `link_used`."""

    def effect() -> tuple[dict, int]:
        challenge_answer_by_link(challenge=challenge)
        return {"done": challenge.purpose}, 200

    return idempotent_execute(
        company=challenge.company,
        key=form_idempotency_key(nonce),
        operation="core.link.verification",
        request={"link": link_digest(key)},
        effect=effect,
    ).body
