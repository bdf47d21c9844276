"""The pages of a manage-my-booking link (agenda.manage_links): see, move or cancel.

Thin views: the link is resolved and limited first (core.customer_links), everything is shown
in the company's language and time zone, a GET never changes anything (scanners open links),
and each POST carries the form's one-time token and Django's CSRF token.
"""

from collections.abc import Callable
from datetime import date, datetime
from functools import wraps
from itertools import groupby

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.views.decorators.http import require_http_methods

from agenda import clock
from agenda.manage_actions import MAX_REASON, manage_cancel, manage_move
from agenda.manage_links import (
    PURPOSE,
    ManageTarget,
    SlotChoice,
    chosen_slot,
    cutoff_passed,
    manage_target,
    move_options,
    nearest_choices,
)
from agenda.models import CUSTOMER_STATE_LABELS, Appointment
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
from core.errors import GaranteError
from core.l10n import date_shown, time_shown, weekday_shown

# Refusals of a chosen slot: the page offers the nearest free ones instead.
_SLOT_REFUSALS = {"slot_taken", "slot_in_past", "slot_too_soon", "slot_unavailable"}

View = Callable[[HttpRequest, ManageTarget, str], HttpResponse]


def _link_page(view: View) -> Callable[[HttpRequest, str], HttpResponse]:
    """Resolve the link (limited per address and per link before anything is read), then
    run `view` in the company's language and time zone; an altered link gets the invalid
    page, one past the appointment's end the expired page."""

    @wraps(view)
    def page(request: HttpRequest, token: str) -> HttpResponse:
        key = link_key(token, PURPOSE)
        wait = limits_take(request, key)
        if wait is not None:
            return too_many_requests_response(request, wait)
        target = manage_target(key) if key is not None else None
        if target is None:
            return invalid_link_response(request)
        company = target.appointment.company
        with translation.override(company.language), timezone.override(company.tz):
            if target.expired:
                return notice_response(
                    request,
                    heading=_g("Enlace caducado"),
                    text=_g(
                        "Este enlace ya no sirve: la cita a la que se refiere ya terminó. Para "
                        "otra cita, use el enlace de su último mensaje o consulte a la empresa."
                    ),
                    status=410,
                    company=company.name,
                )
            return page_headers(view(request, target, token))

    return page


def _when(instant: datetime, tz) -> dict[str, str]:
    return {
        "weekday": weekday_shown(instant, tz),
        "date": date_shown(instant, tz),
        "time": time_shown(instant, tz),
    }


def _context(target: ManageTarget, token: str, now: datetime, **extra) -> dict:
    appointment = target.appointment
    company = appointment.company
    scheduled = appointment.state == Appointment.State.SCHEDULED
    late = scheduled and cutoff_passed(appointment, now)
    return {
        "language": company.language,
        "company": company.name,
        "service": appointment.service.name,
        "professional": appointment.professional.display_name,
        "when": _when(appointment.starts_at, company.tz),
        "state": appointment.state,
        "state_label": CUSTOMER_STATE_LABELS[appointment.state],
        "can_change": scheduled and not late,
        "cutoff_passed": late,
        "urls": {
            "page": reverse("appointment_manage", args=[token]),
            "cancel": reverse("appointment_manage_cancel", args=[token]),
            "move": reverse("appointment_manage_move", args=[token]),
        },
        "form_token": form_token_new(target.key),
        "max_reason": MAX_REASON,
        **extra,
    }


def _refreshed(target: ManageTarget) -> ManageTarget:
    """The link's appointment as it is now (after a change, or a refused one)."""
    return manage_target(target.key) or target


def _form_refusal(request: HttpRequest, target: ManageTarget, token: str) -> str | HttpResponse:
    """The nonce of the submitted form, or the page saying why it is refused."""
    check = form_token_check(request.POST.get("form_token", ""), target.key)
    if check.nonce is not None:
        return check.nonce
    text = (
        _g("Esta página llevaba demasiado tiempo abierta. Vuelva a abrirla y repita la operación.")
        if check.expired
        else _g("Ese formulario no es de esta página. Vuelva a abrirla y repita la operación.")
    )
    context = _context(target, token, clock.now(), error=text)
    return render(request, "agenda/manage/page.html", context, status=400)


@require_http_methods(["GET", "HEAD"])
@_link_page
def appointment_manage(request: HttpRequest, target: ManageTarget, token: str) -> HttpResponse:
    """The appointment as it stands, with its actions while it can still change."""
    return render(request, "agenda/manage/page.html", _context(target, token, clock.now()))


@require_http_methods(["GET", "HEAD", "POST"])
@_link_page
def appointment_manage_cancel(
    request: HttpRequest, target: ManageTarget, token: str
) -> HttpResponse:
    """GET asks for confirmation (with an optional reason); the POST cancels, once."""
    if request.method != "POST":  # GET or HEAD (a link scanner): only shows
        return render(request, "agenda/manage/cancel.html", _context(target, token, clock.now()))
    nonce = _form_refusal(request, target, token)
    if isinstance(nonce, HttpResponse):
        return nonce
    try:
        manage_cancel(target, nonce=nonce, reason=request.POST.get("reason", ""))
    except GaranteError as error:
        context = _context(_refreshed(target), token, clock.now(), error=error_text(error))
        return render(request, "agenda/manage/cancel.html", context, status=error.http_status)
    context = _context(_refreshed(target), token, clock.now(), done=_g("Su cita está cancelada."))
    return render(request, "agenda/manage/page.html", context)


def _days(choices: list[SlotChoice], tz) -> list[dict]:
    """The slots grouped by local day, each day named in the company's language."""
    days = []
    for _day, group in groupby(choices, key=lambda c: c.starts_at.astimezone(tz).date()):
        slots = list(group)
        days.append(
            {
                "label": "{weekday} {date}".format(**_when(slots[0].starts_at, tz)),
                "slots": [
                    {
                        "value": c.value,
                        "time": time_shown(c.starts_at, tz),
                        "professional": c.professional,
                    }
                    for c in slots
                ],
            }
        )
    return days


def _first_day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _move_page(
    request: HttpRequest,
    target: ManageTarget,
    token: str,
    *,
    first_day: date | None,
    error: str = "",
    offered: list[SlotChoice] | None = None,
    status: int = 200,
) -> HttpResponse:
    """The move form: the free slots of a week from `first_day`, or, after a refusal,
    `offered` (the nearest free ones)."""
    now = clock.now()
    tz = target.appointment.company.tz
    context = _context(target, token, now, error=error, nearest=offered is not None)
    if context["can_change"]:
        if offered is None:
            try:
                options = move_options(target, first_day=first_day, now=now)
            except GaranteError as refused:  # a week past the booking horizon
                context["error"] = str(refused.user_message)
                options = None
            if options is not None:
                offered = options.choices
                move = context["urls"]["move"]
                context["next_url"] = f"{move}?from={options.next_day.isoformat()}"
                if options.previous_day is not None:
                    context["previous_url"] = f"{move}?from={options.previous_day.isoformat()}"
        context["days"] = _days(offered or [], tz)
    return render(request, "agenda/manage/move.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@_link_page
def appointment_manage_move(request: HttpRequest, target: ManageTarget, token: str) -> HttpResponse:
    """GET lists free slots of the same service; the POST moves to the chosen one, once."""
    if request.method != "POST":  # GET or HEAD (a link scanner): only shows
        return _move_page(request, target, token, first_day=_first_day(request.GET.get("from")))
    nonce = _form_refusal(request, target, token)
    if isinstance(nonce, HttpResponse):
        return nonce
    slot = chosen_slot(target, request.POST.get("slot", ""))
    if slot is None:
        return _move_page(
            request,
            target,
            token,
            first_day=None,
            error=_g("Elija una de las horas libres de la lista."),
            status=422,
        )
    try:
        manage_move(target, nonce=nonce, slot=slot)
    except GaranteError as error:
        fresh = _refreshed(target)
        offered, message = None, error_text(error)
        if error.code in _SLOT_REFUSALS:
            start = datetime.fromisoformat(slot["start"])
            offered = nearest_choices(fresh, start, clock.now())
            message = (
                _g("Esa hora ya no está libre. Estas son las horas libres más cercanas:")
                if offered
                else _g("Esa hora ya no está libre, y no hay horas libres cerca de ella.")
            )
        return _move_page(
            request,
            fresh,
            token,
            first_day=None,
            error=message,
            offered=offered,
            status=error.http_status,
        )
    fresh = _refreshed(target)
    moved = _when(fresh.appointment.starts_at, fresh.appointment.company.tz)
    done = _g("Hecho: su cita es ahora el %(weekday)s %(date)s a las %(time)s.") % moved
    return render(
        request, "agenda/manage/page.html", _context(fresh, token, clock.now(), done=done)
    )
