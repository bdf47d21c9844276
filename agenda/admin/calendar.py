"""The team's calendar in the admin: its menu entry ("Calendar", /admin/agenda/calendar/), the
day and week grid (agenda.calendar_page), the booking page a free cell opens (an existing
customer by the admin's autocomplete, or a new one created in the same form), and an
appointment's page with its details, notes and what can be done to it now: moved (the grid
shows where to), cancelled (through the confirmation page every cancellation takes), or
nothing when it is past.

Whoever may see appointments may see the calendar; booking, moving and cancelling need the
appointments' own permissions, checked by their admin. Every write goes through
agenda.services (and core.services for a new customer), in one transaction.
"""

from datetime import date
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from agenda import calendar_page, clock, services
from agenda.admin.appointments import off_grid_field
from agenda.admin.common import local_start
from agenda.availability.local_time import describe_instant, in_words
from agenda.models import NOTES_MAX_LENGTH, Appointment, Calendar, Professional, Service
from core.admin import CompanyScopedAdmin
from core.errors import GaranteError
from core.l10n import day_shown, time_shown
from core.models import Company, Contact
from core.normalize import normalize_email
from core.services import contact_create
from core.sms_policy import sms_phone_normalize


def _appointments_admin(site: admin.AdminSite) -> admin.ModelAdmin:
    return site.get_model_admin(Appointment)


def _ids(values: list[str]) -> list[int]:
    return [int(v) for v in values if v.isdigit()]


def _day(value: str, company: Company) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        return clock.now().astimezone(company.tz).date()


def day_title(day: date, company: Company) -> str:
    """The weekday and the date in the company's language and its one date format."""
    with translation.override(company.language):
        return day_shown(day)


class CustomerSearch(AutocompleteSelect):
    """The admin's autocomplete of customers, with a placeholder: it is also the box's
    accessible name until a customer is chosen (Django's own leaves it empty)."""

    def build_attrs(self, base_attrs: dict, extra_attrs: dict | None = None) -> dict:
        attrs = super().build_attrs(base_attrs, extra_attrs)
        attrs["data-placeholder"] = str(_("Type a name, phone or email"))
        return attrs


class CalendarBookingForm(forms.Form):
    """A booking from a free cell: the professional, day and time chosen on the grid (which
    staff may change), the service, and the customer: one found by the autocomplete, or a new
    one written here (created with the booking, or not at all)."""

    professional = forms.ModelChoiceField(label=_("professional"), queryset=Professional.objects)
    day = forms.DateField(label=_("date"), widget=forms.DateInput(attrs={"type": "date"}))
    at = forms.TimeField(
        label=_("time (company local)"), widget=forms.TimeInput(attrs={"type": "time"})
    )
    service = forms.ModelChoiceField(label=_("service"), queryset=Service.objects)
    contact = forms.ModelChoiceField(
        label=_("existing customer"), queryset=Contact.objects, required=False
    )
    first_name = forms.CharField(label=_("first name"), max_length=100, required=False)
    last_name = forms.CharField(label=_("last name"), max_length=150, required=False)
    phone = forms.CharField(label=_("phone"), max_length=32, required=False)
    email = forms.EmailField(label=_("email"), required=False)
    notes = forms.CharField(
        label=_("notes"),
        required=False,
        max_length=NOTES_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("For staff only: the customer never sees them."),
    )
    off_grid = off_grid_field()

    def __init__(self, *args: Any, company: Company, site: admin.AdminSite, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.company = company
        self.fields["professional"].queryset = Professional.objects.filter(
            company=company, active=True
        ).order_by("display_name")
        self.fields["service"].queryset = Service.objects.filter(
            company=company, active=True
        ).order_by("name")
        self.fields["contact"].queryset = Contact.objects.filter(company=company)
        self.fields["contact"].widget = CustomerSearch(
            Appointment._meta.get_field("contact"), site, attrs={"data-width": "100%"}
        )
        self.fields["contact"].widget.choices = self.fields["contact"].choices
        self.booked: Appointment | None = None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("contact") is None and not data.get("first_name"):
            self.add_error(
                "contact", _("Choose a customer, or write the new customer's first name below.")
            )
        new_without_channel = not (data.get("phone") or data.get("email"))
        if data.get("contact") is None and data.get("first_name") and new_without_channel:
            self.add_error("phone", _("A new customer needs a phone or an email."))
        professional, service = data.get("professional"), data.get("service")
        if professional and service and not professional.services.filter(pk=service.pk).exists():
            self.add_error("service", _("That professional does not give this service."))
        if data.get("day") and data.get("at") and not self.errors:
            data["starts_at"] = local_start(self, data["day"], data["at"], self.company.tz)
        return data

    def book(self) -> Appointment | None:
        """Create the customer if new, then book, in one transaction: a refusal (the slot
        taken, off the grid, outside the hours, past) leaves nothing behind and is this form's
        error, with the nearest free slots in `self.nearest`."""
        data = self.cleaned_data
        self.nearest: list[dict[str, str]] = []
        try:
            with transaction.atomic():
                contact = data["contact"] or self._new_customer()
                if contact is None:
                    return None
                self.booked = services.appointment_book(
                    company=self.company,
                    contact=contact,
                    service=data["service"],
                    professional=data["professional"],
                    starts_at=data["starts_at"],
                    created_via=Appointment.Via.STAFF,
                    enforce_customer_rules=False,
                    grid=not data["off_grid"],
                    notes=data["notes"],
                )
        except GaranteError as error:
            self.add_error(None, str(error.user_message))
            self.nearest = list(error.extras.get("nearest_free_slots") or [])
            return None
        return self.booked

    def _new_customer(self) -> Contact | None:
        """The customer written in the form, created; None, with the form's error naming
        them, when one of the company's customers already has that phone or email (staff
        then choose them as the existing customer)."""
        data = self.cleaned_data
        phone = (
            sms_phone_normalize(company=self.company, raw=data["phone"]) if data["phone"] else ""
        )
        email = normalize_email(data["email"]) if data["email"] else ""
        same = Contact.objects.filter(company=self.company).filter(
            (Q(phone=phone) if phone else Q(pk__in=[]))
            | (Q(email=email) if email else Q(pk__in=[]))
        )
        existing = same.first()
        if existing is None:
            try:
                with transaction.atomic():
                    return contact_create(
                        company=self.company,
                        first_name=data["first_name"],
                        last_name=data["last_name"],
                        phone=data["phone"],
                        email=data["email"],
                    )
            except IntegrityError:  # created meanwhile by someone else
                existing = same.first()
                if existing is None:
                    raise
        self.add_error(
            "phone" if phone and existing.phone == phone else "email",
            _("%(name)s already has this phone or email: choose them as the existing customer.")
            % {"name": existing},
        )
        return None


class NotesForm(forms.Form):
    notes = forms.CharField(
        label=_("notes"),
        required=False,
        max_length=NOTES_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("For staff only: the customer never sees them."),
    )


@admin.register(Calendar)
class CalendarAdmin(CompanyScopedAdmin):
    """The calendar's pages. Its permissions are the appointments' (it is their proxy), per
    company as theirs are."""

    def company_permission(self, action: str) -> str:
        return _appointments_admin(self.admin_site).company_permission(action)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _appointments_admin(self.admin_site).has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _appointments_admin(self.admin_site).has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # What the booking page takes from its address: the free cell, and what staff typed
    # before a refusal (a nearest free slot's link carries it).
    prefilled = (
        "professional",
        "day",
        "at",
        "service",
        "contact",
        "first_name",
        "last_name",
        "phone",
        "email",
        "notes",
    )

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("", view(self.calendar_view), name="agenda_calendar_changelist"),
            path("book/", view(self.book_view), name="agenda_calendar_book"),
            path(
                "appointment/<int:pk>/",
                view(self.appointment_view),
                name="agenda_calendar_appointment",
            ),
        ]

    # Which company -------------------------------------------------------------------------------

    def _companies(self, request: HttpRequest) -> list[Company]:
        appointments = _appointments_admin(self.admin_site)
        companies = Company.objects.order_by("name")
        ids = appointments.allowed_company_ids(request, "view", "change")
        if ids is not None:
            companies = companies.filter(pk__in=ids)
        return list(companies)

    def _company(self, request: HttpRequest, companies: list[Company]) -> Company:
        chosen = request.GET.get("company", "")
        for company in companies:
            if str(company.pk) == chosen:
                return company
        if not companies:
            raise PermissionDenied
        return companies[0]

    # The grid ------------------------------------------------------------------------------------

    def calendar_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        appointments = _appointments_admin(self.admin_site)
        moving = self._moving(request)
        companies = self._companies(request)
        company = moving.company if moving is not None else self._company(request, companies)
        view = calendar_page.WEEK if request.GET.get("view") == "week" else calendar_page.DAY
        day = _day(request.GET.get("date", ""), company)
        today = clock.now().astimezone(company.tz).date()
        services_all = list(Service.objects.filter(company=company, active=True).order_by("name"))
        service_id = request.GET.get("service", "")
        service = next((s for s in services_all if str(s.pk) == service_id), None)
        chosen = _ids(request.GET.getlist("professional"))
        everyone = list(
            Professional.objects.filter(company=company, active=True).order_by("display_name")
        )
        professionals = calendar_page.professionals_shown(company, chosen, service)
        days = calendar_page.days_shown(view, day, calendar_page.first_weekday(company))
        grid = calendar_page.calendar_grid(
            company,
            professionals,
            days,
            now=clock.now(),
            service=None if moving is not None else service,
            moving=moving,
        )

        def query(**changes: Any) -> str:
            q = request.GET.copy()
            q["company"] = str(company.pk)
            for key, value in changes.items():
                if value is None:
                    q.pop(key, None)
                else:
                    q[key] = value
            return q.urlencode()

        if view == calendar_page.WEEK:
            title = _("Calendar of %(company)s — week of %(day)s") % {
                "company": company.name,
                "day": day_title(days[0], company),
            }
        else:
            title = _("Calendar of %(company)s — %(day)s") % {
                "company": company.name,
                "day": day_title(day, company),
            }
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "company": company,
            "companies": companies if len(companies) > 1 and moving is None else [],
            "view": view,
            "day": day,
            "grid": grid,
            "day_heads": [
                (day_title(d, company), style, d == today) for d, style in grid.day_heads()
            ],
            "today": today,
            "services": services_all,
            "service": service,
            "professionals": everyone,
            "chosen": chosen,
            "moving": moving,
            "moving_when": None
            if moving is None
            else in_words(describe_instant(moving.starts_at, company.tz)),
            "stop_moving_query": query(move=None),
            "today_query": query(date=today.isoformat()),
            "previous_query": query(date=calendar_page.step_to(view, day, -1).isoformat()),
            "next_query": query(date=calendar_page.step_to(view, day, 1).isoformat()),
            "day_query": query(view=calendar_page.DAY),
            "week_query": query(view=calendar_page.WEEK),
            "may_book": appointments.has_add_permission(request),
            "may_move": appointments.has_change_permission(request),
        }
        with timezone.override(company.tz):
            return TemplateResponse(request, "admin/agenda/calendar/grid.html", context).render()

    def _moving(self, request: HttpRequest) -> Appointment | None:
        """The appointment `?move=` names, if the staff member may move it now: scheduled,
        still to come, of their companies (else a message and the plain grid)."""
        asked = request.GET.get("move", "")
        if not asked:
            return None
        appointments = _appointments_admin(self.admin_site)
        found = (
            appointments.get_queryset(request)
            .select_related("company", "contact", "service", "professional")
            .filter(pk=int(asked) if asked.isdigit() else None)
            .first()
        )
        if (
            found is None
            or found.state != Appointment.State.SCHEDULED
            or found.starts_at <= clock.now()
            or not appointments.has_change_permission(request, found)
        ):
            self.message_user(request, _("That appointment cannot be moved."), messages.ERROR)
            return None
        return found

    # Booking -------------------------------------------------------------------------------------

    def book_view(self, request: HttpRequest) -> HttpResponse:
        appointments = _appointments_admin(self.admin_site)
        if not appointments.has_add_permission(request):
            raise PermissionDenied
        allowed = appointments.allowed_company_ids(request, "add")
        companies = [c for c in self._companies(request) if allowed is None or c.pk in allowed]
        source = request.POST if request.method == "POST" else request.GET
        chosen = source.get("company", "")
        company = next((c for c in companies if str(c.pk) == chosen), None)
        if company is None:
            if not companies:
                raise PermissionDenied
            company = companies[0]
        initial = {k: source.get(k) for k in self.prefilled if k in source}
        if "service" not in initial and initial.get("professional", "").isdigit():
            first = (
                Service.objects.filter(
                    company=company, active=True, professionals=int(initial["professional"])
                )
                .order_by("name")
                .first()
            )
            if first is not None:
                initial["service"] = first.pk
        form = CalendarBookingForm(
            request.POST if request.method == "POST" else None,
            initial=initial,
            company=company,
            site=self.admin_site,
        )
        if request.method == "POST" and form.is_valid() and form.book() is not None:
            booked = form.booked
            self.message_user(
                request,
                _("Booked %(reference)s: %(contact)s, %(service)s with %(professional)s, %(when)s.")
                % {
                    "reference": booked.reference,
                    "contact": booked.contact,
                    "service": booked.service.name,
                    "professional": booked.professional.display_name,
                    "when": f"{day_shown(booked.starts_at, company.tz)} "
                    f"{time_shown(booked.starts_at, company.tz)}",
                },
                messages.SUCCESS,
            )
            day = booked.starts_at.astimezone(company.tz).date()
            return HttpResponseRedirect(
                calendar_page.calendar_url(company, day, booked=booked.reference)
            )
        nearest = []
        names = {p.display_name: p.pk for p in form.fields["professional"].queryset}
        service = (
            form.cleaned_data.get("service")
            if form.is_bound and hasattr(form, "cleaned_data")
            else None
        )
        for slot in getattr(form, "nearest", []):
            pk = names.get(slot.get("professional"))
            if pk is None:
                continue
            query = {
                "company": company.pk,
                "professional": pk,
                "day": slot["date"],
                "at": slot["time"],
            }
            if service is not None:
                query["service"] = service.pk
            # What staff typed comes along: choosing a slot is one step, not a new form.
            for name in self.prefilled:
                if name not in query and request.POST.get(name):
                    query[name] = request.POST[name]
            url = f"{reverse('admin:agenda_calendar_book')}?{urlencode(query)}"
            nearest.append({**slot, "query": query, "url": url})
        day = (
            form.cleaned_data.get("day")
            if form.is_bound and hasattr(form, "cleaned_data")
            else None
        )
        if day is None:
            day = _day(str(initial.get("day", "")), company)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("New appointment"),
            "company": company,
            "form": form,
            "media": self.media + form.media,
            "nearest": nearest,
            "back_url": calendar_page.calendar_url(company, day),
        }
        with timezone.override(company.tz):
            return TemplateResponse(request, "admin/agenda/calendar/book.html", context).render()

    # One appointment -----------------------------------------------------------------------------

    def appointment_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        appointments = _appointments_admin(self.admin_site)
        appointment = (
            appointments.get_queryset(request)
            .select_related("company", "contact", "service", "professional")
            .filter(pk=pk)
            .first()
        )
        if appointment is None or not appointments.has_view_permission(request, appointment):
            raise PermissionDenied
        company = appointment.company
        now = clock.now()
        past = appointment.starts_at <= now
        scheduled = appointment.state == Appointment.State.SCHEDULED
        may_change = appointments.has_change_permission(request, appointment)
        editable = may_change and not past
        form = NotesForm(
            request.POST if request.method == "POST" else None,
            initial={"notes": appointment.notes},
        )
        if request.method == "POST":
            if not editable:
                raise PermissionDenied
            if form.is_valid():
                try:
                    services.appointment_notes_set(
                        company=company,
                        reference=appointment.reference,
                        notes=form.cleaned_data["notes"],
                    )
                except GaranteError as error:
                    form.add_error("notes", str(error.user_message))
                else:
                    self.message_user(request, _("Notes saved."), messages.SUCCESS)
                    return HttpResponseRedirect(request.get_full_path())
        day = appointment.starts_at.astimezone(company.tz).date()
        local_start_at = appointment.starts_at.astimezone(company.tz)
        local_end_at = appointment.ends_at.astimezone(company.tz)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("Appointment %(reference)s") % {"reference": appointment.reference},
            "appointment": appointment,
            "company": company,
            "when": f"{day_title(day, company)} {local_start_at:%H:%M}-{local_end_at:%H:%M}",
            "past": past,
            "form": form if editable else None,
            "move_url": calendar_page.calendar_url(company, day, move=appointment.pk)
            if scheduled and not past and may_change
            else "",
            "cancel_url": reverse(
                "admin:agenda_appointment_transition", args=[appointment.pk, "cancel"]
            )
            + "?"
            + urlencode({"next": calendar_page.calendar_url(company, day)})
            if scheduled and not past and may_change
            else "",
            "record_url": reverse("admin:agenda_appointment_change", args=[appointment.pk]),
            "contact_url": reverse("admin:core_contact_change", args=[appointment.contact_id]),
            "back_url": calendar_page.calendar_url(company, day),
        }
        with timezone.override(company.tz):
            return TemplateResponse(
                request, "admin/agenda/calendar/appointment.html", context
            ).render()
