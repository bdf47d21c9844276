"""Links that let a customer act from a message, outside the chat: what every such page shares.

The apps' pages (agenda.manage_links: see, move or cancel an appointment; sales.quote_pages:
read, accept or reject a quote) each keep a random key of their own on the record the link
names. The link carries that key and a tag (an HMAC of it, keyed from SECRET_KEY and the
page's purpose), never a row id: an altered link fails its tag before any read, and a key
read out of a database backup is no link without the secret. Each page then follows the same
rules, coded here once:

- a GET only shows (mail and SMS scanners open links); every change is a POST of a form
  carrying a one-time form token (`form_token_new`): the POST runs under the idempotency
  engine with that token as its key, so a double submit replays the first answer and changes
  nothing twice;
- requests are limited per link and per client address (`limits_take`), counted in the shared
  cache (Redis with GARANTE_REDIS_URL), in fixed windows;
- a step-up code for the page goes through a conversation of the link's own
  (`link_conversation`), so the verification services apply exactly as for the agent's tools.
"""

import hashlib
import hmac
import logging
import re
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone, translation
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _g

from core.errors import GaranteError
from core.models import Company, Contact, Conversation

logger = logging.getLogger("garante.links")

_KEY_BYTES = 18  # 144 random bits: 24 URL-safe characters
_TAG_CHARS = 16  # 96 bits of the HMAC, URL-safe
_TOKEN = re.compile(r"[A-Za-z0-9_-]{40}")
_FORM_SALT = "garante.links.form"


def link_key_new() -> str:
    """A fresh random key for a record's link (stored on the record, unique)."""
    return secrets.token_urlsafe(_KEY_BYTES)


def _tag(key: str, purpose: str) -> str:
    digest = salted_hmac(f"garante.links.{purpose}", key, algorithm="sha256").digest()
    return signing.b64_encode(digest).decode()[:_TAG_CHARS]


def link_token(key: str, purpose: str) -> str:
    """What the link's URL carries: the key and its tag, 40 URL-safe characters."""
    return key + _tag(key, purpose)


def link_key(token: str, purpose: str) -> str | None:
    """The key a link's token carries, or None for a token that is not one of ours for this
    purpose (altered, made up, of another page): nothing is read for it."""
    if not _TOKEN.fullmatch(token):
        return None
    key, tag = token[:-_TAG_CHARS], token[-_TAG_CHARS:]
    if not hmac.compare_digest(tag, _tag(key, purpose)):
        return None
    return key


def link_digest(key: str) -> str:
    """A short name of a link for counters, conversations and logs: never the key itself."""
    return hashlib.sha256(key.encode()).hexdigest()[:24]


# --- One-time forms ------------------------------------------------------------------------


def form_token_new(key: str) -> str:
    """A token for one rendered form of the link `key`: a random nonce, signed with a
    timestamp and bound to the link, so that it works only with this link and only for
    GARANTE_CUSTOMER_LINK_FORM_MAX_AGE."""
    return signing.TimestampSigner(salt=f"{_FORM_SALT}.{key}").sign(secrets.token_urlsafe(16))


@dataclass(frozen=True)
class FormCheck:
    nonce: str | None  # the form's one-time nonce, or None when the token is refused
    expired: bool = False


def form_token_check(token: str, key: str) -> FormCheck:
    """The nonce of a form token of the link `key`, or why it is refused: expired (the page
    was left open too long), or not of this link (altered, made up, another link's)."""
    signer = signing.TimestampSigner(salt=f"{_FORM_SALT}.{key}")
    try:
        return FormCheck(signer.unsign(token, max_age=settings.GARANTE_CUSTOMER_LINK_FORM_MAX_AGE))
    except signing.SignatureExpired:
        return FormCheck(None, expired=True)
    except signing.BadSignature:
        return FormCheck(None)


def form_idempotency_key(nonce: str) -> str:
    """The idempotency engine's key for one submitted form (scoped to the company, as every
    key; the prefix keeps it apart from the Gateway's and the integration API's)."""
    return f"link-form:{nonce}"


def signed_choice(value: str, key: str) -> str:
    """A choice offered by a link's form (a free slot), signed for that link: the POST gets
    back only what the page offered."""
    return signing.Signer(salt=f"garante.links.choice.{key}").sign(value)


def signed_choice_value(signed: str, key: str) -> str | None:
    try:
        return signing.Signer(salt=f"garante.links.choice.{key}").unsign(signed)
    except signing.BadSignature:
        return None


# --- Rate limits ------------------------------------------------------------------------------


def client_address(request: HttpRequest) -> str:
    """The client's address. Behind the TLS proxy (SECURE_PROXY_SSL_HEADER set: the deployment's
    nginx, which sets X-Forwarded-For to the address it saw) the last X-Forwarded-For entry,
    the one the proxy wrote; otherwise the peer's address."""
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if settings.SECURE_PROXY_SSL_HEADER and forwarded:
        return forwarded.split(",")[-1].strip()[:64]
    return request.META.get("REMOTE_ADDR", "")[:64]


def _window_count(name: str, period: int) -> tuple[int, int]:
    """Add one to this period's counter of `name`: the count and the seconds the window has
    left. A cache that cannot be reached counts nothing (0): the limits guard against abuse;
    the links themselves are unguessable, and an outage of Redis must not close the pages."""
    now = time.time()
    window = int(now // period)
    retry_after = max(1, int((window + 1) * period - now) + 1)
    counter = f"links:{name}:{window}"
    store = caches["shared"]
    try:
        store.add(counter, 0, timeout=period + 1)
        try:
            count = store.incr(counter)
        except ValueError:  # expired between the two statements
            store.add(counter, 1, timeout=period + 1)
            count = 1
    except Exception:
        logger.warning("customer link limits: the shared cache is unreachable; not counted")
        return 0, retry_after
    return count, retry_after


def limits_take(request: HttpRequest, key: str | None) -> int | None:
    """Count this request against its client address's limit and, for a link that is one of
    ours (`key`), that link's: the seconds to wait when one is exceeded, else None. Each
    limit is (requests, seconds): GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS and _PER_LINK."""
    address = hashlib.sha256(client_address(request).encode()).hexdigest()[:24]
    checks = [("address:" + address, settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS)]
    if key is not None:
        checks.append(("link:" + link_digest(key), settings.GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK))
    waits = []
    for name, (limit, period) in checks:
        count, retry_after = _window_count(name, period)
        if count > limit:
            waits.append(retry_after)
    return max(waits) if waits else None


def page_headers(response: HttpResponse) -> HttpResponse:
    """What every customer page adds to the app's security headers (SecurityMiddleware's,
    the frame options): never cached (a shared computer's back button), never indexed, a
    Referer for the site's own pages only (the address holds the link's key; "no-referrer"
    would make browsers send `Origin: null` with the forms, which CSRF rightly refuses), and
    a content policy that allows nothing but its own inline style and forms posting back to
    the site."""
    response.headers["Cache-Control"] = "no-store, private"
    response.headers["X-Robots-Tag"] = "noindex, nofollow"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return response


# --- Step-up codes from a page ----------------------------------------------------------------

# A link page's conversation's `identified_via`: its page asks for a step-up code in its own
# form, so the code goes to it whatever else the company sends (core.verification.issue).
LINK_CONVERSATION_VIA = "link"


def link_conversation(*, company: Company, contact: Contact, key: str) -> Conversation:
    """The conversation of a link's page, created on first need: the step-up services
    (core.verification's codes, core.identity's policy check) work on a conversation, and this
    one is the link's alone, bound to the customer the link was sent to. Staff find it in the
    admin as "link:…" with its codes."""
    conversation, _created = Conversation.objects.select_related("contact").get_or_create(
        company=company,
        external_id="link:" + link_digest(key),
        defaults={
            "contact": contact,
            "identified_via": LINK_CONVERSATION_VIA,
            "identified_at": timezone.now(),
        },
    )
    return conversation


# --- The pages every link shares ---------------------------------------------------------------


def notice_response(
    request: HttpRequest,
    *,
    heading: str,
    text: str,
    status: int,
    company: str = "",
    tone: str = "notice",
    retry_after: int | None = None,
) -> HttpResponse:
    """A page that only tells something (an invalid, expired or over-used link), in the
    active language, with the customer pages' headers."""
    context = {
        "heading": heading,
        "text": text,
        "company": company,
        "tone": tone,
        "language": translation.get_language(),
    }
    response = render(request, "customer/notice.html", context, status=status)
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return page_headers(response)


def invalid_link_response(request: HttpRequest) -> HttpResponse:
    """An altered, incomplete or made-up link: it names nothing, so it tells nothing (404)."""
    return notice_response(
        request,
        heading=_g("Enlace no válido"),
        text=_g(
            "Este enlace no es válido: puede que esté incompleto. Abra el enlace del último "
            "mensaje que recibió, o consulte a la empresa."
        ),
        status=404,
        tone="error",
    )


def too_many_requests_response(request: HttpRequest, retry_after: int) -> HttpResponse:
    """Past a limit per link or per address (429, with Retry-After)."""
    return notice_response(
        request,
        heading=_g("Demasiadas peticiones"),
        text=_g(
            "Se han hecho muchas peticiones seguidas desde aquí. Por seguridad, espere unos "
            "minutos y vuelva a intentarlo."
        ),
        status=429,
        tone="error",
        retry_after=retry_after,
    )


def error_text(error: GaranteError) -> str:
    """What a page tells the customer of a refusal: the service's own message, except for the
    idempotency engine's, which speak of keys to a machine; here the key is a form."""
    if error.code == "idempotency_conflict":
        return _g("Ese formulario ya se envió. Vuelva a abrir la página para hacer otro cambio.")
    if error.code == "request_in_progress":
        return _g("Su petición anterior todavía se está procesando. Espere unos segundos.")
    return str(error.user_message)
