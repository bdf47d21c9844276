"""SMS backends in the style of django.core.mail: console, file, in-memory, and Twilio over HTTP.

`sms_send(to, body)` uses settings.GARANTE_SMS_BACKEND (an alias below or a dotted path) and
returns the provider's result. Backends raise SmsTransientError when retrying may help (5xx,
429, timeouts, connection failures) and SmsPermanentError otherwise (4xx, and any answer that
is not a 2xx success); the caller decides retries.
"""

import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import httpx
from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

ALIASES = {
    "console": "core.sms.ConsoleBackend",
    "file": "core.sms.FileBackend",
    "locmem": "core.sms.LocmemBackend",
    "twilio": "core.sms.TwilioBackend",
}


class SmsError(Exception):
    """A message was not accepted. `detail` is safe to store: it never contains the body."""

    def __init__(self, detail: str) -> None:
        self.detail = detail[:300]
        super().__init__(self.detail)


class SmsTransientError(SmsError):
    """The provider may accept the same message later."""


class SmsPermanentError(SmsError):
    """Retrying the same message will not help (bad number, bad credentials, refused)."""


@dataclass(frozen=True)
class SmsResult:
    message_id: str
    status: str


@dataclass(frozen=True)
class SmsMessage:
    to: str
    body: str


class BaseSmsBackend:
    def send(self, message: SmsMessage) -> SmsResult:
        raise NotImplementedError


class ConsoleBackend(BaseSmsBackend):
    """Writes messages to stdout: the development stand-in for a phone."""

    def send(self, message: SmsMessage) -> SmsResult:
        message_id = f"console-{uuid.uuid4().hex[:12]}"
        sys.stdout.write(f"SMS to {message.to}: {message.body}\n")
        sys.stdout.flush()
        return SmsResult(message_id=message_id, status="printed")


class FileBackend(BaseSmsBackend):
    """Writes each message to its own file under settings.GARANTE_SMS_FILE_PATH."""

    def send(self, message: SmsMessage) -> SmsResult:
        directory = Path(settings.GARANTE_SMS_FILE_PATH)
        directory.mkdir(parents=True, exist_ok=True)
        message_id = f"{timezone.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:12]}"
        (directory / f"{message_id}.sms").write_text(
            f"To: {message.to}\n\n{message.body}\n", encoding="utf-8"
        )
        return SmsResult(message_id=message_id, status="written")


class LocmemBackend(BaseSmsBackend):
    """Keeps messages in `LocmemBackend.outbox`, for tests."""

    outbox: ClassVar[list[SmsMessage]] = []
    _lock = threading.Lock()

    def send(self, message: SmsMessage) -> SmsResult:
        with self._lock:
            self.outbox.append(message)
        return SmsResult(message_id=f"locmem-{uuid.uuid4().hex[:12]}", status="stored")


class TwilioBackend(BaseSmsBackend):
    """Twilio's Messages REST API over plain HTTPS (form-encoded POST, HTTP basic auth).

    GARANTE_TWILIO_FROM is a sender number, or a Messaging Service SID (starting "MG").
    """

    def send(self, message: SmsMessage) -> SmsResult:
        account = settings.GARANTE_TWILIO_ACCOUNT_SID
        sender = settings.GARANTE_TWILIO_FROM
        if not account or not settings.GARANTE_TWILIO_AUTH_TOKEN or not sender:
            raise SmsPermanentError("twilio is not configured")
        url = (
            f"{settings.GARANTE_TWILIO_API_URL.rstrip('/')}"
            f"/2010-04-01/Accounts/{account}/Messages.json"
        )
        form = {"To": message.to, "Body": message.body}
        form["MessagingServiceSid" if sender.startswith("MG") else "From"] = sender
        try:
            response = httpx.post(
                url,
                data=form,
                auth=(account, settings.GARANTE_TWILIO_AUTH_TOKEN),
                timeout=settings.GARANTE_SMS_TIMEOUT_SECONDS,
            )
        except httpx.TimeoutException as exc:
            raise SmsTransientError(f"timeout: {type(exc).__name__}") from None
        except httpx.TransportError as exc:
            raise SmsTransientError(f"transport: {type(exc).__name__}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise SmsTransientError(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise SmsPermanentError(f"HTTP {response.status_code}{_twilio_error_code(response)}")
        if not response.is_success:
            # A redirect (an http:// API URL, a proxy in front) or a 1xx: the POST was not
            # handled, and following it would re-send the form elsewhere. Retrying the same
            # URL answers the same: a configuration error.
            raise SmsPermanentError(f"HTTP {response.status_code}: not an answer of the API")
        try:
            payload = response.json()
            return SmsResult(message_id=str(payload["sid"]), status=str(payload.get("status", "")))
        except (ValueError, KeyError, TypeError):
            # Accepted, but the answer is unreadable: do not send again, record what we know.
            return SmsResult(message_id="", status=f"HTTP {response.status_code}")


def _twilio_error_code(response: httpx.Response) -> str:
    # Twilio's error body has a numeric "code"; keep only that (never echo the request).
    try:
        code = response.json().get("code")
    except (ValueError, AttributeError):
        return ""
    return f" (twilio {int(code)})" if isinstance(code, int) else ""


def get_sms_backend() -> BaseSmsBackend:
    path = settings.GARANTE_SMS_BACKEND
    return import_string(ALIASES.get(path, path))()


def sms_send(*, to: str, body: str) -> SmsResult:
    return get_sms_backend().send(SmsMessage(to=to, body=body))
