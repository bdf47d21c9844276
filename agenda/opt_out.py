"""Customers opting out of appointment messages from the messages themselves.

Staff can set a contact's opt-outs in the admin; a customer should not have to ask. When the
site's public address is configured (GARANTE_PUBLIC_URL), every confirmation and reminder
(agenda.appointment_messages) ends with a link for the channel it came on, and an email also carries
`List-Unsubscribe` with one-click unsubscribing (RFC 8058), the button mail clients show.

The link carries an opaque key of its message (`AppointmentMessage.opt_out_key`: 144 random
bits, drawn when the message is first claimed for sending), not a row id: it names nobody and
tells nothing of how many contacts or messages there are, and the key is its only credential.
It works for OPT_OUT_LINK_LIFETIME from then (long past the RFC 8058 and CAN-SPAM floor of 30
days; every later message brings a fresh one), and after that shows the "expired" page and
changes nothing. Links of the first format (the contact's id and the channel, signed, with no
expiry) already sent keep working until LEGACY_LINKS_HONOURED_UNTIL, then show that page too.

Following a link (GET) only shows the question, since mail scanners fetch links; the answer is
a POST, which is also what a mail client's one-click sends, without a CSRF token. Opting out
twice is no change and answers the same.
"""

import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core import signing
from django.urls import reverse

from agenda import clock
from agenda.models import AppointmentMessage
from core.models import Contact
from core.outbound import EMAIL, SMS

logger = logging.getLogger("garante.agenda.messages")

# How long a link works after its message was first claimed for sending.
OPT_OUT_LINK_LIFETIME = timedelta(days=60)
# The first format's links (sent until December 2026) work until then: the lifetime of a new
# link, counted from the change of format.
LEGACY_LINKS_HONOURED_UNTIL = datetime(2027, 2, 6, tzinfo=UTC)

_KEY_BYTES = 18  # 144 bits, 24 URL-safe characters
_KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{24}")
_LEGACY_SALT = "garante.agenda.opt-out"
_LEGACY_CODES = {"s": SMS, "e": EMAIL}
_FIELDS = {SMS: "sms_opt_out", EMAIL: "email_opt_out"}


@dataclass(frozen=True)
class OptOutLink:
    url: str
    # For email: what mail clients read to offer their own unsubscribe button.
    headers: dict[str, str]


def opt_out_key_new(now: datetime) -> tuple[str, datetime]:
    """A fresh key for a message's link, and when the link stops working."""
    return secrets.token_urlsafe(_KEY_BYTES), now + OPT_OUT_LINK_LIFETIME


def opt_out_link(message: AppointmentMessage) -> OptOutLink | None:
    """The link that opts the message's contact out of its channel, or None with no public
    address (or no key: a message never claimed for sending)."""
    base = settings.GARANTE_PUBLIC_URL
    if not base or not message.opt_out_key:
        return None
    url = base + reverse("appointment_messages_opt_out", args=[message.opt_out_key])
    headers = {}
    if message.channel == EMAIL:
        headers = {
            "List-Unsubscribe": f"<{url}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        }
    return OptOutLink(url, headers)


@dataclass(frozen=True)
class OptOutTarget:
    contact: Contact
    channel: str
    # Past its lifetime: the page says so and nothing changes.
    expired: bool = False


def opt_out_target(token: str) -> OptOutTarget | None:
    """The contact and channel a link names (expired or not), or None for a link that names
    nothing: altered, made up, or of a contact or message deleted since."""
    now = clock.now()
    if _KEY_PATTERN.fullmatch(token):
        message = (
            AppointmentMessage.objects.select_related("appointment__contact__company")
            .filter(opt_out_key=token)
            .only("channel", "opt_out_until", "appointment__contact")
            .first()
        )
        if message is None:
            return None
        expired = message.opt_out_until is None or message.opt_out_until <= now
        return OptOutTarget(message.appointment.contact, message.channel, expired)
    return _legacy_target(token, now)


def _legacy_target(token: str, now: datetime) -> OptOutTarget | None:
    try:
        value = signing.Signer(salt=_LEGACY_SALT).unsign(token)
    except signing.BadSignature:
        return None
    contact_id, _, code = value.partition(".")
    channel = _LEGACY_CODES.get(code)
    if channel is None or not contact_id.isdigit():
        return None
    contact = Contact.objects.select_related("company").filter(pk=int(contact_id)).first()
    if contact is None:
        return None
    return OptOutTarget(contact, channel, expired=now >= LEGACY_LINKS_HONOURED_UNTIL)


def contact_messages_opt_out(*, contact: Contact, channel: str) -> bool:
    """Stop appointment messages to `contact` on `channel`: whether this changed anything.
    Messages already written are dropped when their turn comes (agenda.appointment_messages
    reads the opt-out again at the send)."""
    field = _FIELDS[channel]
    changed = Contact.objects.filter(pk=contact.pk, **{field: False}).update(**{field: True})
    if changed:
        logger.info("contact %s opted out of appointment messages by %s", contact.pk, channel)
    return bool(changed)
