"""One message to one customer, by SMS or by email: what the verification codes
(core.verification), the appointment messages (agenda.appointment_messages), the notices of changed
contact details (core.services) and the quotes' emails (sales) all send, and the one gate
every customer message passes.

`message_send` hands the message to its channel once and answers what the provider said of it.
An SMS first passes the company's SMS policy (core.sms_policy: mobile numbers of the countries
it serves, within its hourly budget), or is refused (OutboundRefused, saying why). A sandbox
company's messages never reach a real channel, whatever backends are configured: they are
kept in its outbox (core.models.OutboxMessage), which staff read in the admin.
It raises OutboundTransient when a later try of the same message may be accepted (an SMTP 4yz
reply, a dropped connection, an SMS provider's 5xx, 429 or timeout) and OutboundRefused when
none will be (an SMTP 5yz reply, a bad number, bad credentials). Their `detail` is safe to
store: it never holds the body. Retrying is the caller's decision.
"""

from dataclasses import dataclass
from email.utils import make_msgid

from django.core.mail import EmailMessage

from core.mail import smtp_error_is_transient, smtp_error_summary
from core.models import Company, OutboxMessage
from core.sms import SmsPermanentError, SmsTransientError, sms_send
from core.sms_policy import sms_budget_take, sms_refusal

SMS, EMAIL = "sms", "email"


class OutboundError(Exception):
    def __init__(self, detail: str) -> None:
        self.detail = detail[:300]
        super().__init__(self.detail)


class OutboundTransient(OutboundError):
    """The channel may accept the same message later."""


class OutboundRefused(OutboundError):
    """The channel refused the message for good: sending it again cannot help."""


@dataclass(frozen=True)
class Sent:
    """What the provider said of a message it took, cut to what the rows store."""

    provider_message_id: str
    provider_status: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "provider_message_id", self.provider_message_id[:100])
        object.__setattr__(self, "provider_status", self.provider_status[:40])


class SentUnrecorded(Exception):
    """The message left, but recording it failed (the database stopped answering): the task
    retries the record alone, never the send. `sent` is what the record needs, as keywords."""

    def __init__(self, sent: dict[str, str]) -> None:
        super().__init__("sent, outcome not recorded")
        self.sent = sent


def message_send(
    *,
    company: Company,
    channel: str,
    to: str,
    subject: str,
    body: str,
    headers: dict[str, str] | None = None,
) -> Sent:
    """Send `body` to `to`, a customer of `company`, by `channel` (SMS or EMAIL; `subject` and
    `headers` are for email), once; into the company's outbox if it is a sandbox."""
    if channel not in (SMS, EMAIL):
        raise ValueError(f"no such channel: {channel!r}")
    if channel == SMS:
        refusal = sms_refusal(company=company, phone=to)
        if refusal is not None:
            raise OutboundRefused(f"not sent: {refusal.value} (the company's SMS policy)")
        if not sms_budget_take(company=company):
            raise OutboundRefused("not sent: the company's hourly SMS budget is spent")
    if company.is_sandbox:
        kept = OutboxMessage.objects.create(
            company=company,
            channel=channel,
            destination=to,
            subject=subject[:300] if channel == EMAIL else "",
            body=body,
        )
        return Sent(f"outbox-{kept.pk}", "kept in the sandbox outbox")
    if channel == SMS:
        try:
            result = sms_send(to=to, body=body)
        except SmsTransientError as exc:
            raise OutboundTransient(exc.detail) from None
        except SmsPermanentError as exc:
            raise OutboundRefused(exc.detail) from None
        return Sent(result.message_id, result.status)
    message_id = make_msgid(domain="garante.local")
    email = EmailMessage(
        subject=subject, body=body, to=[to], headers={**(headers or {}), "Message-ID": message_id}
    )
    try:
        email.send(fail_silently=False)
    except OSError as exc:  # SMTPException is one
        error = smtp_error_summary(exc)
        if smtp_error_is_transient(exc):
            raise OutboundTransient(error) from None
        raise OutboundRefused(error) from None
    return Sent(message_id, "accepted")
