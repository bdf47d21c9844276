"""The agenda's public addresses: the page a customer reaches from the link in an appointment
message (agenda.opt_out), and the calendar feeds staff subscribe to (agenda.feeds)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_safe

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


@require_safe
def calendar_feed(request: HttpRequest, token: str) -> HttpResponse:
    """The feed's calendar (text/calendar). A calendar app fetching a dead URL shows the body
    of the refusal at best, so each says in a sentence what happened: 404 for a URL that was
    never a feed (or was mistyped), 410 for a revoked or regenerated one."""
    feed = calendar_feed_find(token)
    if feed is None:
        return _feed_refusal(
            _("This calendar link does not exist. Check that it was copied whole."), 404
        )
    if feed.revoked_at is not None:
        with translation.override(feed.company.language):
            message = _(
                "This calendar link of %(company)s was revoked or replaced by a new one and no "
                "longer works. Ask the company's administrator for the current link."
            ) % {"company": feed.company.name}
        return _feed_refusal(message, 410)
    credential_touch(CalendarFeed, feed.pk, feed)
    response = HttpResponse(
        calendar_feed_ics(feed=feed, now=clock.now()),
        content_type="text/calendar; charset=utf-8",
    )
    response["Content-Disposition"] = 'inline; filename="calendar.ics"'
    # The customers' names are in it: no shared cache keeps a copy.
    response["Cache-Control"] = "private, max-age=300"
    response["X-Robots-Tag"] = "noindex"
    return response


def _feed_refusal(message: str, status: int) -> HttpResponse:
    response = HttpResponse(message + "\n", content_type="text/plain; charset=utf-8", status=status)
    response["Cache-Control"] = "no-store"
    return response
