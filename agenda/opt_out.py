"""Customers opting out of appointment messages from the messages themselves.

Staff can set a contact's opt-outs in the admin; a customer should not have to ask. When the
site's public address is configured (GARANTE_PUBLIC_URL), every confirmation and reminder
(agenda.messages) ends with a link for the channel it came on, and an email also carries
`List-Unsubscribe` with one-click unsubscribing (RFC 8058), the button mail clients show.

The link holds the contact's id and the channel, signed (django.core.signing, a salt of its
own): the signature is its only credential, it names nothing personal, and an altered link is
refused. Following it (GET) only shows the question, since mail scanners fetch links; the
answer is a POST, which is also what a mail client's one-click sends, without a CSRF token.
Opting out twice is no change and answers the same.
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.urls import reverse

from core.models import Contact
from core.outbound import EMAIL, SMS

logger = logging.getLogger("garante.agenda.messages")

_SALT = "garante.agenda.opt-out"
_CODES = {SMS: "s", EMAIL: "e"}
_FIELDS = {SMS: "sms_opt_out", EMAIL: "email_opt_out"}


@dataclass(frozen=True)
class OptOutLink:
    url: str
    # For email: what mail clients read to offer their own unsubscribe button.
    headers: dict[str, str]


def opt_out_link(contact_id: int, channel: str) -> OptOutLink | None:
    """The link that opts the contact out of `channel`, or None with no public address."""
    base = settings.GARANTE_PUBLIC_URL
    if not base:
        return None
    token = signing.Signer(salt=_SALT).sign(f"{contact_id}.{_CODES[channel]}")
    url = base + reverse("appointment_messages_opt_out", args=[token])
    headers = {}
    if channel == EMAIL:
        headers = {
            "List-Unsubscribe": f"<{url}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        }
    return OptOutLink(url, headers)


@dataclass(frozen=True)
class OptOutTarget:
    contact: Contact
    channel: str


def opt_out_target(token: str) -> OptOutTarget | None:
    """The contact and channel a link names, or None for a link altered or of no contact."""
    try:
        value = signing.Signer(salt=_SALT).unsign(token)
    except signing.BadSignature:
        return None
    contact_id, _, code = value.partition(".")
    channel = {code: channel for channel, code in _CODES.items()}.get(code)
    contact = Contact.objects.select_related("company").filter(pk=int(contact_id)).first()
    if channel is None or contact is None:
        return None
    return OptOutTarget(contact, channel)


def contact_messages_opt_out(*, contact: Contact, channel: str) -> bool:
    """Stop appointment messages to `contact` on `channel`: whether this changed anything.
    Messages already written are dropped when their turn comes (agenda.messages reads the
    opt-out again at the send)."""
    field = _FIELDS[channel]
    changed = Contact.objects.filter(pk=contact.pk, **{field: False}).update(**{field: True})
    if changed:
        logger.info("contact %s opted out of appointment messages by %s", contact.pk, channel)
    return bool(changed)
