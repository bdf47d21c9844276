"""The page of a verification's one-tap link (core.verification.links): one button.

Thin, like the other customer pages (core.customer_links): the link is limited per address and
per link before anything is read, shown in the company's language, never cached; a GET (or a
HEAD: mail and SMS scanners open links) only shows the button, and the POST of its form, with
a one-time form token and Django's CSRF token, answers the challenge once. What the page says
and what the tap does follow the challenge's purpose (core.verification.check.LinkAnswer). It
shows the customer's first name and nothing else of them.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.views.decorators.http import require_http_methods

from core.customer_links import (
    error_text,
    form_token_check,
    form_token_new,
    invalid_link_response,
    limits_take,
    notice_response,
    page_headers,
    too_many_requests_response,
)
from core.errors import GaranteError
from core.models import VerificationChallenge
from core.verification.check import LinkAnswer, challenge_link_refusal, link_answer
from core.verification.links import (
    verification_link_answer,
    verification_link_challenge,
    verification_link_key_of,
)

# A link that no longer takes a tap (used, expired, replaced, voided): gone for good.
_GONE = {"link_used", "link_expired", "link_superseded", "link_revoked", "link_invalid"}


@require_http_methods(["GET", "HEAD", "POST"])
def verification_link_page(request: HttpRequest, token: str) -> HttpResponse:
    key = verification_link_key_of(token)
    wait = limits_take(request, key)
    if wait is not None:
        return too_many_requests_response(request, wait)
    challenge = verification_link_challenge(key) if key is not None else None
    answer = link_answer(challenge.purpose) if challenge is not None else None
    if challenge is None or answer is None:
        return invalid_link_response(request)
    with translation.override(challenge.company.language):
        if request.method == "POST":
            response = _tap(request, challenge, answer, key, token)
        else:
            refusal = challenge_link_refusal(challenge, now=timezone.now())
            if refusal is not None:
                response = _refused(request, challenge, refusal)
            else:
                response = _page(request, challenge, answer, key, token)
        return page_headers(response)


def _page(
    request: HttpRequest,
    challenge: VerificationChallenge,
    answer: LinkAnswer,
    key: str,
    token: str,
    *,
    error: str = "",
    done: str = "",
    status: int = 200,
) -> HttpResponse:
    company = challenge.company
    context = {
        "language": company.language,
        "company": company.name,
        "first_name": challenge.contact.first_name if challenge.contact else "",
        "heading": str(answer.heading),
        # A confirmation's page says what the tap confirms, in the words its message used.
        "text": str(answer.text) % {"company": company.name, "action": challenge.action_summary},
        "button": str(answer.button),
        "action": reverse("verification_link", args=[token]),
        "form_token": form_token_new(key),
        "error": error,
        "done": done,
    }
    return render(request, "customer/verification.html", context, status=status)


def _tap(
    request: HttpRequest,
    challenge: VerificationChallenge,
    answer: LinkAnswer,
    key: str,
    token: str,
) -> HttpResponse:
    check = form_token_check(request.POST.get("form_token", ""), key)
    if check.nonce is None:
        text = (
            _g("Esta página llevaba demasiado tiempo abierta. Vuelva a abrir el enlace.")
            if check.expired
            else _g("Ese formulario no es de esta página. Vuelva a abrir el enlace.")
        )
        return _page(request, challenge, answer, key, token, error=text, status=400)
    try:
        verification_link_answer(challenge=challenge, key=key, nonce=check.nonce)
    except GaranteError as error:
        return _refused(request, challenge, error)
    return _page(request, challenge, answer, key, token, done=str(answer.done))


def _refused(
    request: HttpRequest, challenge: VerificationChallenge, error: GaranteError
) -> HttpResponse:
    gone = getattr(error, "code", "") in _GONE
    return notice_response(
        request,
        heading=_g("Enlace no disponible") if gone else _g("No se pudo confirmar"),
        text=error_text(error),
        status=410 if gone else error.http_status,
        company=challenge.company.name,
        tone="error",
    )
