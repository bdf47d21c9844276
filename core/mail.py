"""What a mail server's refusal means for whoever sends email: may the same message be
accepted later (retry it), or not (settle it, and say why)."""

import smtplib


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
