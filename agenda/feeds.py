"""Calendar feeds: a secret ICS URL a professional (or the whole company's front desk)
subscribes to in Google Calendar, Apple Calendar or Outlook, so their agenda is on their phone.

A feed is a bearer credential (agenda.models.CalendarFeed on core.models.BearerCredential):
its token is the URL's only secret, 256 random bits shown once and stored as a SHA-256, and it
is issued, regenerated (a new URL, the old one dead in the same transaction) and revoked
through core.credentials, the lifecycle every token of Garante goes through. A revoked URL
answers 410 with a sentence saying so, an unknown one 404 (agenda.views.calendar_feed).

The calendar is written with the `icalendar` library. Each event is one appointment of the
window agenda.selectors.appointments_for_feed reads (30 days back, a year ahead, bounded):
its UID is the appointment's public reference at the company, so a client updates the same
event when it moves; SEQUENCE is the appointment's revision, bumped by each move and by the
cancellation (RFC 5545 3.8.7.4, what makes clients take the change). DTSTART and DTEND are the
company's wall-clock times qualified by its TZID, with the VTIMEZONE that defines it (RFC 5545
3.6.5, built by icalendar from the zone database over the years of the window): a client shows
them in the viewer's zone as UTC would, and besides keeps the event's own zone, so a
professional abroad sees "10:00 (Madrid)" in the event, as Google and Apple Calendar show an
invitation made there. DTSTAMP, CREATED and LAST-MODIFIED stay in UTC, as 3.8.7 requires. A
cancelled appointment stays in the feed
with STATUS:CANCELLED (and transparent), so a subscribed calendar drops or strikes it rather
than keep a stale copy. The customer is named by first name only; their phone and email
are added only when the company's agenda settings say so (`feed_shows_contact_details`).
"""

from datetime import date, datetime, timedelta

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from icalendar import Calendar, Event

from agenda.models import CUSTOMER_STATE_LABELS, Appointment, CalendarFeed, Professional
from agenda.selectors import FEED_AHEAD, FEED_PAST, agenda_settings_for, appointments_for_feed
from core.credentials.services import credential_issue, credential_revoke, credential_rotate
from core.errors import NotInCompany
from core.models import Company

PRODID = "-//Garante//Calendar feed//EN"
# How often clients that honour it (Apple Calendar, Thunderbird) poll; Google polls on its own
# schedule, a few times a day, whatever the feed says.
REFRESH_INTERVAL = timedelta(minutes=15)

WHOLE_COMPANY = gettext_lazy("Whole company")


def calendar_feed_issue(
    *, company: Company, professional: Professional | None = None, name: str = ""
) -> tuple[CalendarFeed, str]:
    """A new feed of the professional's appointments (the company's, without one); returns it
    with its clear token, which is never stored. Another company's professional is not
    found."""
    if professional is not None:
        NotInCompany.check(
            professional.company_id,
            company.pk,
            gettext_lazy("No encontré a ese profesional."),
            code="professional_not_found",
        )
    label = name.strip() or (professional.display_name if professional else str(WHOLE_COMPANY))
    return credential_issue(CalendarFeed, company=company, name=label, professional=professional)


def calendar_feed_regenerate(*, feed: CalendarFeed) -> tuple[CalendarFeed, str]:
    """A new URL for the same calendar; the old one stops working in the same transaction.
    A revoked feed is not regenerated (Conflict `credential_revoked`): issue a new one."""
    return credential_rotate(credential=feed)


def calendar_feed_revoke(*, feed: CalendarFeed) -> CalendarFeed:
    """The feed's URL stops working for good (its page says so); revoking twice is no change."""
    return credential_revoke(credential=feed)


def calendar_feed_url(token: str, request: HttpRequest | None = None) -> str:
    """The address to subscribe to: under the site's public address when it is configured
    (GARANTE_PUBLIC_URL), else under the address the staff member's request came to."""
    path = reverse("calendar_feed", args=[token])
    if settings.GARANTE_PUBLIC_URL:
        return settings.GARANTE_PUBLIC_URL + path
    return request.build_absolute_uri(path) if request is not None else path


def calendar_feed_ics(*, feed: CalendarFeed, now: datetime) -> bytes:
    """The feed's calendar as iCalendar bytes (RFC 5545), in the company's language."""
    company = feed.company
    contact_details = agenda_settings_for(company=company).feed_shows_contact_details
    appointments = appointments_for_feed(feed=feed, now=now)
    with translation.override(company.language):
        calendar = Calendar()
        calendar.add("prodid", PRODID)
        calendar.add("version", "2.0")
        calendar.add("calscale", "GREGORIAN")
        title = (
            f"{feed.professional.display_name} · {company.name}"
            if feed.professional is not None
            else company.name
        )
        # The name and zone clients show for a subscribed calendar (de facto properties that
        # Google, Apple and Outlook read; RFC 7986's NAME for the others).
        calendar.add("name", title)
        calendar.add("x-wr-calname", title)
        calendar.add("x-wr-timezone", company.timezone)
        calendar.add("refresh-interval", REFRESH_INTERVAL, parameters={"VALUE": "DURATION"})
        calendar.add("x-published-ttl", REFRESH_INTERVAL)
        for appointment in appointments:
            calendar.add_component(
                _event(
                    appointment,
                    company,
                    with_professional=feed.professional is None,
                    contact_details=contact_details,
                )
            )
        # The zone's rules from the window's first year to past its last: the same all year,
        # so the feed's bytes (and its ETag) change only when an appointment does.
        calendar.add_missing_timezones(
            first_date=date((now - FEED_PAST).year, 1, 1),
            last_date=date((now + FEED_AHEAD).year + 1, 1, 1),
        )
    return calendar.to_ical()


def _event(
    appointment: Appointment, company: Company, *, with_professional: bool, contact_details: bool
) -> Event:
    cancelled = appointment.state == Appointment.State.CANCELLED
    state = str(CUSTOMER_STATE_LABELS.get(appointment.state, appointment.state))
    customer = appointment.contact.first_name
    summary = f"{appointment.service.name} · {customer}"
    if with_professional:
        summary += f" ({appointment.professional.display_name})"
    if appointment.state != Appointment.State.SCHEDULED:
        summary += f" [{state}]"
    lines = [
        _("Service: %(service)s") % {"service": appointment.service.name},
        _("Customer: %(name)s") % {"name": customer},
        _("Professional: %(name)s") % {"name": appointment.professional.display_name},
        _("State: %(state)s") % {"state": state},
        _("Reference: %(reference)s") % {"reference": appointment.reference},
    ]
    if contact_details:
        if appointment.contact.phone:
            lines.append(_("Phone: %(phone)s") % {"phone": appointment.contact.phone})
        if appointment.contact.email:
            lines.append(_("Email: %(email)s") % {"email": appointment.contact.email})
    event = Event()
    # The public reference is unique within the company: with the company's slug it names this
    # appointment in any calendar for good, through moves and cancellation.
    event.add("uid", f"{appointment.reference}.{company.slug}@garante")
    event.add("dtstamp", appointment.updated_at)
    event.add("created", appointment.created_at)
    event.add("last-modified", appointment.updated_at)
    event.add("sequence", appointment.sequence)
    event.add("dtstart", appointment.starts_at.astimezone(company.tz))
    event.add("dtend", appointment.ends_at.astimezone(company.tz))
    event.add("summary", summary)
    event.add("description", "\n".join(lines))
    event.add("status", "CANCELLED" if cancelled else "CONFIRMED")
    event.add("transp", "TRANSPARENT" if cancelled else "OPAQUE")
    return event
