"""The pages of a quote's link (sales.quote_links, sales.quote_pages): read, accept, reject.

Thin views, like the manage-my-booking pages (agenda.manage_views): the link resolved and
limited first (core.customer_links), the company's language and time zone, a GET that changes
nothing, and POSTs carrying a one-time form token and Django's CSRF token. Accepting (and
rejecting, when the company's policy asks) may need a step-up code: the page sends it to the
customer's own phone or email and asks for it, then acts.
"""

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from core.customer_links import (
    error_text,
    form_token_check,
    form_token_new,
    invalid_link_response,
    limits_take,
    link_key,
    notice_response,
    page_headers,
    too_many_requests_response,
)
from core.errors import GaranteError, PermissionRefused
from core.l10n import datetime_shown
from sales import money
from sales.models import QUOTE_STATE_LABELS, Quote
from sales.quote_links import PURPOSE, QuoteTarget, quote_target
from sales.quote_pages import (
    MAX_REASON,
    quote_page_accept,
    quote_page_code_check,
    quote_page_code_send,
    quote_page_reject,
)

View = Callable[[HttpRequest, QuoteTarget, str], HttpResponse]
_DONE = {"accept": _("Ha aceptado la cotización."), "reject": _("Ha rechazado la cotización.")}


def _link_page(view: View) -> Callable[[HttpRequest, str], HttpResponse]:
    """Resolve and limit the link, then run `view` in the company's language and zone."""

    @wraps(view)
    def page(request: HttpRequest, token: str) -> HttpResponse:
        key = link_key(token, PURPOSE)
        wait = limits_take(request, key)
        if wait is not None:
            return too_many_requests_response(request, wait)
        target = quote_target(key) if key is not None else None
        if target is None:
            return invalid_link_response(request)
        company = target.quote.company
        with translation.override(company.language), timezone.override(company.tz):
            if target.expired:
                return notice_response(
                    request,
                    heading=_g("Enlace caducado"),
                    text=_g(
                        "Este enlace ya no sirve: la cotización venció hace tiempo. Si aún le "
                        "interesa, pida una nueva a la empresa."
                    ),
                    status=410,
                    company=company.name,
                )
            return page_headers(view(request, target, token))

    return page


def _context(target: QuoteTarget, token: str, **extra) -> dict:
    quote = target.quote
    company = quote.company
    state = quote.effective_state(timezone.now())
    currency = quote.currency
    return {
        "language": company.language,
        "company": company.name,
        "reference": quote.reference,
        "lines": [
            {
                "name": line.name,
                "sku": line.sku,
                "quantity": line.quantity,
                "unit_price": money.spoken(line.unit_price, currency),
                "subtotal": money.spoken(line.subtotal, currency),
            }
            for line in quote.lines.all()
        ],
        "subtotal": money.spoken(quote.subtotal, currency),
        "tax": money.spoken(quote.tax_total, currency),
        "total": money.spoken(quote.total, currency),
        "valid_until": datetime_shown(quote.valid_until),
        "state": state,
        "state_label": QUOTE_STATE_LABELS[state],
        "is_open": state == Quote.State.SENT,
        "urls": {
            name: reverse(f"quote_page{suffix}", args=[token])
            for name, suffix in (
                ("page", ""),
                ("accept", "_accept"),
                ("reject", "_reject"),
                ("code", "_code"),
            )
        },
        "form_token": form_token_new(target.key),
        "max_reason": MAX_REASON,
        **extra,
    }


def _fresh(target: QuoteTarget) -> QuoteTarget:
    return quote_target(target.key) or target


def _nonce(request: HttpRequest, target: QuoteTarget, token: str) -> str | HttpResponse:
    check = form_token_check(request.POST.get("form_token", ""), target.key)
    if check.nonce is not None:
        return check.nonce
    text = (
        _g("Esta página llevaba demasiado tiempo abierta. Vuelva a abrirla y repita la operación.")
        if check.expired
        else _g("Ese formulario no es de esta página. Vuelva a abrirla y repita la operación.")
    )
    return render(
        request, "sales/quote_page/page.html", _context(target, token, error=text), status=400
    )


def _perform(target: QuoteTarget, action: str, nonce: str, reason: str) -> None:
    if action == "accept":
        quote_page_accept(target, nonce=nonce)
    else:
        quote_page_reject(target, nonce=nonce, reason=reason)


def _act(request: HttpRequest, target: QuoteTarget, token: str, action: str, nonce: str):
    """Accept or reject, once per form; a code is sent and asked for when the policy says."""
    reason = request.POST.get("reason", "")[:MAX_REASON]
    try:
        _perform(target, action, nonce, reason)
    except PermissionRefused as refused:
        if refused.code != "verification_required":
            return _refused(request, target, token, refused)
        return _send_code(request, target, token, action, reason)
    except GaranteError as error:
        return _refused(request, target, token, error)
    return _done(request, target, token, action)


def _done(request: HttpRequest, target: QuoteTarget, token: str, action: str) -> HttpResponse:
    context = _context(_fresh(target), token, done=str(_DONE[action]))
    return render(request, "sales/quote_page/page.html", context)


def _refused(request, target, token, error: GaranteError, template: str = "page") -> HttpResponse:
    context = _context(_fresh(target), token, error=error_text(error))
    return render(request, f"sales/quote_page/{template}.html", context, status=error.http_status)


def _send_code(request, target, token, action: str, reason: str, channel: str = ""):
    try:
        challenge = quote_page_code_send(target, channel=channel)
    except GaranteError as error:
        return _refused(request, target, token, error)
    return _code_page(request, target, token, action, reason, sent_to=challenge.masked_destination)


def _code_page(request, target, token, action, reason, *, sent_to="", error="", status=200):
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    contact = target.quote.contact
    context = _context(
        target,
        token,
        action=action,
        reason=reason,
        sent_to=sent_to,
        minutes=minutes,
        error=error,
        both_channels=bool(contact.phone and contact.email),
    )
    return render(request, "sales/quote_page/code.html", context, status=status)


@require_http_methods(["GET", "HEAD"])
@_link_page
def quote_page(request: HttpRequest, target: QuoteTarget, token: str) -> HttpResponse:
    """The quote: its lines, totals, validity and state, and while open, accept or reject."""
    return render(request, "sales/quote_page/page.html", _context(target, token))


@require_http_methods(["POST"])
@_link_page
def quote_page_accept_view(request: HttpRequest, target: QuoteTarget, token: str) -> HttpResponse:
    nonce = _nonce(request, target, token)
    if isinstance(nonce, HttpResponse):
        return nonce
    return _act(request, target, token, "accept", nonce)


@require_http_methods(["GET", "HEAD", "POST"])
@_link_page
def quote_page_reject_view(request: HttpRequest, target: QuoteTarget, token: str) -> HttpResponse:
    """GET asks for confirmation (and an optional reason); the POST rejects, once."""
    if request.method != "POST":  # GET or HEAD (a link scanner): only shows
        return render(request, "sales/quote_page/reject.html", _context(target, token))
    nonce = _nonce(request, target, token)
    if isinstance(nonce, HttpResponse):
        return nonce
    return _act(request, target, token, "reject", nonce)


@require_http_methods(["POST"])
@_link_page
def quote_page_code_view(request: HttpRequest, target: QuoteTarget, token: str) -> HttpResponse:
    """The step-up code typed (then the action runs), or another code asked for."""
    nonce = _nonce(request, target, token)
    if isinstance(nonce, HttpResponse):
        return nonce
    action = request.POST.get("action")
    if action not in _DONE:
        return invalid_link_response(request)
    reason = request.POST.get("reason", "")[:MAX_REASON]
    if "resend" in request.POST:
        return _send_code(request, target, token, action, reason, request.POST["resend"])
    # This very form already acted (a double submit), or the link's conversation is still
    # verified: the action answers without a code. Otherwise the code is checked first.
    try:
        _perform(target, action, nonce, reason)
    except PermissionRefused as refused:
        if refused.code != "verification_required":
            return _refused(request, target, token, refused)
    except GaranteError as error:
        return _refused(request, target, token, error)
    else:
        return _done(request, target, token, action)
    try:
        quote_page_code_check(target, code=request.POST.get("code", ""))
    except GaranteError as error:
        return _code_page(
            request,
            target,
            token,
            action,
            reason,
            error=error_text(error),
            status=error.http_status,
        )
    return _act(request, target, token, action, nonce)
