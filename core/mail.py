"""What a mail server's refusal means for whoever sends email: may the same message be
accepted later (retry it), or not (settle it, and say why); and the one way a notice to staff
is emailed."""

import smtplib

from django.conf import settings
from django.core.mail import EmailMessage


def smtp_error_is_transient(exc: OSError) -> bool:
    """Whether the same message may be accepted later (RFC 5321: 4yz is "try again later",
    5yz is final): a 4yz reply (for a refusal of recipients, every refused recipient's), a
    dropped connection, a network error. Any other SMTP error is permanent."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _message in exc.recipients.values()]
        return bool(codes) and all(400 <= code < 500 for code in codes)
    if isinstance(exc, smtplib.SMTPResponseException):
        return 400 <= exc.smtp_code < 500
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return True
    # SMTPException subclasses OSError: any other of them is a refusal, not the network.
    return not isinstance(exc, smtplib.SMTPException)


def smtp_error_summary(exc: OSError) -> str:
    """A short, storable description of a mail error (no addresses, no server text)."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = "/".join(sorted({str(code) for code, _message in exc.recipients.values()}))
        return f"SMTP recipient refused {codes}".rstrip()
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"SMTP {exc.smtp_code}"
    return f"SMTP {type(exc).__name__}"


def staff_email_send(*, subject: str, body: str, recipients: list[str]) -> str:
    """Email staff (never customers: theirs go through core.outbound) one notice, every
    recipient in Bcc so none learns the others' addresses; "" once the server took it, or a
    refusal for good's summary (to keep on the notice's row, which then is not retried).
    A transient error is raised, for the caller's task to retry."""
    message = EmailMessage(
        subject=" ".join(subject.split())[:200],
        body=body,
        bcc=recipients,
        headers={"To": "undisclosed-recipients:;"},
    )
    try:
        message.send()
    except OSError as exc:  # SMTPException is one
        if smtp_error_is_transient(exc):
            raise
        return smtp_error_summary(exc)
    return ""


def admin_link(path: str) -> str:
    """An admin page's address for an email to staff: absolute under the site's public address
    (GARANTE_PUBLIC_URL), else the path alone, which staff open on their usual admin host."""
    return f"{settings.GARANTE_PUBLIC_URL}{path}"
