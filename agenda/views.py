"""The agenda's public addresses: the page a customer reaches from the link in an appointment
message (agenda.opt_out), and the calendar feeds staff subscribe to (agenda.feeds)."""

import hashlib
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import condition, require_http_methods, require_safe

from agenda import clock
from agenda.feeds import calendar_feed_ics
from agenda.models import CalendarFeed
from agenda.opt_out import contact_messages_opt_out, opt_out_target
from agenda.selectors import calendar_feed_find
from core.credentials.selectors import credential_touch


# The link's key is the credential, and a mail client's one-click unsubscribe (RFC 8058) posts
# without a token of ours; the only thing a POST can do is stop messages to its own contact.
@csrf_exempt
@require_http_methods(["GET", "POST"])
def appointment_messages_opt_out(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks (a mail scanner following the link changes nothing); POST opts out. A link
    past its lifetime answers 410 with a page saying so, and changes nothing."""
    target = opt_out_target(token)
    if target is None:
        return render(request, "agenda/opt_out.html", {"invalid": True}, status=404)
    with translation.override(target.contact.company.language):
        if target.expired:
            context = {
                "expired": True,
                "company": target.contact.company.name,
                "language": target.contact.company.language,
            }
            return render(request, "agenda/opt_out.html", context, status=410)
        done = request.method == "POST"
        if done:
            contact_messages_opt_out(contact=target.contact, channel=target.channel)
        context = {
            "company": target.contact.company.name,
            "by_sms": target.channel == "sms",
            "done": done,
            "language": target.contact.company.language,
        }
        return render(request, "agenda/opt_out.html", context)


@dataclass(frozen=True)
class _FeedAnswer:
    """A live feed's calendar, computed once per request: the conditional check (its ETag)
    and the view (its body) both read it."""

    body: bytes
    etag: str


def _feed_answer(request: HttpRequest, token: str) -> _FeedAnswer | None:
    """The calendar of the live feed `token` names (None for an unknown or revoked one), kept
    on the request for the view after `condition` has checked its ETag."""
    if not hasattr(request, "_calendar_feed_answer"):
        answer = None
        feed = calendar_feed_find(token)
        if feed is not None and feed.revoked_at is None:
            # A 304 is a use of the feed too: its "last used" counts every poll.
            credential_touch(CalendarFeed, feed.pk, feed)
            body = calendar_feed_ics(feed=feed, now=clock.now())
            answer = _FeedAnswer(body, hashlib.sha256(body).hexdigest()[:32])
        request._calendar_feed_answer = answer
    return request._calendar_feed_answer


def _feed_etag(request: HttpRequest, token: str) -> str | None:
    answer = _feed_answer(request, token)
    return None if answer is None else answer.etag


# Calendar apps poll every few minutes: an unchanged feed answers 304 with no body. The ETag is
# the digest of the calendar's bytes, which depend only on what it shows (no "now" in them), so
# it changes exactly when the feed does. No Last-Modified: no timestamp records a customer's or
# service's new name, or the company turning contact details on, which all change the feed, so
# If-Modified-Since alone (without If-None-Match) always gets the whole calendar.
@require_safe
@condition(etag_func=_feed_etag)
def calendar_feed(request: HttpRequest, token: str) -> HttpResponse:
    """The feed's calendar (text/calendar), or 304 when the client's copy is current. A
    calendar app fetching a dead URL shows the body of the refusal at best, so each says in a
    sentence what happened: 404 for a URL that was never a feed (or was mistyped), 410 for a
    revoked or regenerated one."""
    answer = _feed_answer(request, token)
    if answer is None:
        feed = calendar_feed_find(token)
        if feed is None:
            return _feed_refusal(
                _("This calendar link does not exist. Check that it was copied whole."), 404
            )
        with translation.override(feed.company.language):
            message = _(
                "This calendar link of %(company)s was revoked or replaced by a new one and no "
                "longer works. Ask the company's administrator for the current link."
            ) % {"company": feed.company.name}
        return _feed_refusal(message, 410)
    response = HttpResponse(answer.body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="calendar.ics"'
    # The customers' names are in it: no shared cache keeps a copy. Past five minutes a
    # client asks again with its ETag, and an unchanged feed costs it a 304.
    response["Cache-Control"] = "private, max-age=300"
    response["X-Robots-Tag"] = "noindex"
    return response


def _feed_refusal(message: str, status: int) -> HttpResponse:
    response = HttpResponse(message + "\n", content_type="text/plain; charset=utf-8", status=status)
    response["Cache-Control"] = "no-store"
    return response
