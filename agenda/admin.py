"""Staff admin for the agenda: catalogue, professionals with their hours and time off, a day view,
and appointments whose transition buttons go through agenda.services."""

from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminTimeWidget
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agenda import agenda_page, clock, services
from agenda.availability.local_time import describe_instant, local_instant
from agenda.models import (
    END_OF_DAY,
    AgendaSettings,
    Appointment,
    AppointmentMessage,
    Professional,
    Service,
    TimeOff,
    WorkingHours,
)
from agenda.selectors import appointments_within_time_off
from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
)
from core.errors import GaranteError
from core.models import Company


def _local(instant: datetime, company: Company) -> str:
    return instant.astimezone(company.tz).strftime("%Y-%m-%d %H:%M")


def _local_start(form: forms.Form, day: date, at: time, tz: ZoneInfo) -> datetime | None:
    """The instant of a local date and time typed by staff, read as every other path reads it
    (`local_instant`); a time that does not exist that day (the spring-forward gap) is a form
    error on `at` rather than silently another hour. A repeated autumn time is its first."""
    starts_at = local_instant(day, at, tz)
    if starts_at.astimezone(tz).replace(tzinfo=None) != datetime.combine(day, at):
        form.add_error(
            "at",
            _(
                "%(time)s does not exist on %(day)s in the company's time zone: the clocks go "
                "forward then. Choose another time."
            )
            % {"time": at.strftime("%H:%M"), "day": day.isoformat()},
        )
        return None
    return starts_at


_LISTED_IN_WARNING = 10


def warn_of_appointments_within(request: HttpRequest, time_off: TimeOff) -> None:
    """Tell staff who just saved this time off which scheduled appointments fall inside it:
    they stay booked (the customers were told) until staff reschedule or cancel them."""
    within = list(appointments_within_time_off(time_off=time_off)[: _LISTED_IN_WARNING + 1])
    if not within:
        return
    company = time_off.professional.company
    listed = ", ".join(
        f"{a.reference} ({_local(a.starts_at, company)}, {a.contact})"
        for a in within[:_LISTED_IN_WARNING]
    )
    if len(within) > _LISTED_IN_WARNING:
        listed += ", …"
    messages.warning(
        request,
        _(
            "Scheduled appointments of %(professional)s fall within this time off and stay "
            "booked until you reschedule or cancel them: %(appointments)s."
        )
        % {"professional": time_off.professional, "appointments": listed},
    )


@admin.register(Service)
class ServiceAdmin(CompanyScopedAdmin):
    list_display = [
        "name",
        "company",
        "duration_minutes",
        "buffer_before_minutes",
        "buffer_after_minutes",
        "active",
    ]
    list_filter = ["active", "company"]
    search_fields = ["name"]


class EndOfDayTimeField(forms.TimeField):
    """A working interval's end, where staff may type 24:00, the end of the day: kept as 00:00
    (`END_OF_DAY`, which a TimeField can hold) and shown back as 24:00."""

    def to_python(self, value: Any) -> time | None:
        if isinstance(value, str) and value.strip() in ("24:00", "24:00:00"):
            return END_OF_DAY
        return super().to_python(value)

    def prepare_value(self, value: Any) -> Any:
        return "24:00" if value == END_OF_DAY else super().prepare_value(value)


class WorkingHoursForm(forms.ModelForm):
    end_time = EndOfDayTimeField(
        label=_("until"),
        widget=AdminTimeWidget(format="%H:%M"),
        help_text=_("24:00 is the end of the day."),
    )

    class Meta:
        model = WorkingHours
        fields = ["weekday", "start_time", "end_time"]


class WorkingHoursInline(admin.TabularInline):
    model = WorkingHours
    form = WorkingHoursForm
    extra = 0
    verbose_name_plural = _("weekly working hours (company local time)")


class TimeOffInline(admin.TabularInline):
    model = TimeOff
    extra = 0
    fields = ["starts_at", "ends_at", "reason"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Past time off is history; the inline shows what still matters.
        return super().get_queryset(request).filter(ends_at__gte=clock.now())


@admin.register(Professional)
class ProfessionalAdmin(CompanyScopedAdmin):
    list_display = ["display_name", "company", "active", "day_view_link"]
    list_filter = ["active", "company"]
    search_fields = ["display_name"]
    filter_horizontal = ["services"]
    inlines = [WorkingHoursInline, TimeOffInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is TimeOff:
            saved = [*formset.new_objects, *(obj for obj, _fields in formset.changed_objects)]
            for time_off in saved:
                warn_of_appointments_within(request, time_off)

    @admin.display(description=_("agenda"))
    def day_view_link(self, professional: Professional) -> str:
        url = reverse("admin:agenda_professional_day", args=[professional.pk])
        return format_html('<a href="{}">{}</a>', url, _("Day view"))

    def get_urls(self) -> list:
        return [
            path(
                "<int:professional_id>/day/",
                self.admin_site.admin_view(self.day_view),
                name="agenda_professional_day",
            ),
            path(
                "agenda/",
                self.admin_site.admin_view(self.company_day_view),
                name="agenda_company_day",
            ),
            *super().get_urls(),
        ]

    def day_view(self, request: HttpRequest, professional_id: int) -> HttpResponse:
        """One professional's day (or week, `?view=week`): hours, appointments, free slots."""
        professional = get_object_or_404(self.get_queryset(request), pk=professional_id)
        if not self.has_view_permission(request, professional):
            return HttpResponse(status=403)
        company = professional.company
        day = _day_asked(request, company)
        week = request.GET.get("view") == "week"
        days = [day + timedelta(days=n) for n in range(agenda_page.WEEK_DAYS if week else 1)]
        service = agenda_page.service_for(company, professional, request.GET.get("service", ""))
        grid = agenda_page.columns(company, [professional], days, service)
        step = timedelta(days=agenda_page.WEEK_DAYS if week else 1)
        title = _("%(name)s — %(day)s") % {
            "name": professional.display_name,
            "day": describe_instant_day(day, company.tz),
        }
        return self._agenda_response(
            request,
            company,
            title=title,
            day=day,
            step=step,
            grid=grid,
            service=service,
            services=agenda_page.services_offered(company, professional),
            professional=professional,
            week=week,
            extra={"intervals": grid[0]["intervals"], "appointments": grid[0]["appointments"]},
        )

    def company_day_view(self, request: HttpRequest) -> HttpResponse:
        """Every active professional of a company side by side for one day."""
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        companies = Company.objects.order_by("name")
        ids = self.allowed_company_ids(request, "view", "change")
        if ids is not None:
            companies = companies.filter(pk__in=ids)
        chosen = request.GET.get("company", "")
        company = (companies.filter(pk=int(chosen)).first() if chosen.isdigit() else None) or (
            companies.first()
        )
        if company is None:
            return HttpResponse(status=403)
        day = _day_asked(request, company)
        professionals = list(
            Professional.objects.filter(company=company, active=True).order_by("display_name")
        )
        service = agenda_page.service_for(company, None, request.GET.get("service", ""))
        grid = agenda_page.columns(company, professionals, [day], service) if professionals else []
        title = _("Agenda of %(company)s — %(day)s") % {
            "company": company.name,
            "day": describe_instant_day(day, company.tz),
        }
        return self._agenda_response(
            request,
            company,
            title=title,
            day=day,
            step=timedelta(days=1),
            grid=grid,
            service=service,
            services=agenda_page.services_offered(company, None),
            companies=list(companies) if len(companies) > 1 else [],
        )

    def _agenda_response(
        self,
        request: HttpRequest,
        company: Company,
        *,
        title: str,
        day: date,
        step: timedelta,
        grid: list,
        service: Service | None,
        services: list,
        professional: Professional | None = None,
        week: bool = False,
        companies: list | None = None,
        extra: dict | None = None,
    ) -> HttpResponse:
        def moved(to: date) -> str:
            query = request.GET.copy()
            query["date"] = to.isoformat()
            return query.urlencode()

        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "company": company,
            "professional": professional,
            "day": day,
            "week": week,
            "previous_query": moved(day - step),
            "next_query": moved(day + step),
            "grid": grid,
            "service": service,
            "services": services,
            "companies": companies or [],
            "may_book": self.admin_site._registry[Appointment].has_add_permission(request),
            **(extra or {}),
        }
        with timezone.override(company.tz):
            response = TemplateResponse(request, "admin/agenda/agenda_page.html", context)
            return response.render()


def _day_asked(request: HttpRequest, company: Company) -> date:
    try:
        return date.fromisoformat(request.GET.get("date", ""))
    except ValueError:
        return clock.now().astimezone(company.tz).date()


def describe_instant_day(day: date, tz: ZoneInfo) -> str:
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=tz)
    described = describe_instant(noon, tz)
    return f"{described['weekday']} {described['date']}"


@admin.register(TimeOff)
class TimeOffAdmin(CompanyScopedAdmin):
    company_path = "professional__company"
    list_display = ["professional", "local_start", "local_end", "reason"]
    list_filter = ["professional__company", "professional"]
    list_select_related = ["professional__company"]
    date_hierarchy = "starts_at"

    # Each row in its own company's time: the list may hold several companies' time off.
    @admin.display(description=_("starts (local)"), ordering="starts_at")
    def local_start(self, time_off: TimeOff) -> str:
        return _local(time_off.starts_at, time_off.professional.company)

    @admin.display(description=_("ends (local)"), ordering="ends_at")
    def local_end(self, time_off: TimeOff) -> str:
        return _local(time_off.ends_at, time_off.professional.company)

    def save_model(self, request: HttpRequest, obj: TimeOff, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        warn_of_appointments_within(request, obj)


@admin.register(AgendaSettings)
class AgendaSettingsAdmin(CompanyScopedAdmin):
    list_display = [
        "company",
        "minimum_notice_minutes",
        "booking_horizon_days",
        "slot_step_minutes",
        "cancellation_cutoff_minutes",
        "auto_no_show",
        "reminder_hours_before",
    ]


class AppointmentAddForm(forms.ModelForm):
    """A staff booking: the date and time are read in the company's own timezone, and the
    booking is made here, by the service, so that every refusal (a slot taken a moment ago,
    in the past, outside the working hours or past the horizon) is an error in this form. Staff,
    like the service (enforce_customer_rules=False), are not held to the minimum notice. The admin
    runs the form inside its transaction: nothing stays booked if the page fails after."""

    day = forms.DateField(label=_("date"), widget=admin.widgets.AdminDateWidget)
    at = forms.TimeField(label=_("time (company local)"), widget=admin.widgets.AdminTimeWidget)

    class Meta:
        model = Appointment
        fields = ["company", "contact", "service", "professional"]

    booked: Appointment | None = None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company = data.get("company")
        if company is None or any(data.get(f) is None for f in ("contact", "service", "day")):
            return data
        for name in ("contact", "service", "professional"):
            if data.get(name) is not None and data[name].company_id != company.pk:
                self.add_error(name, _("It belongs to another company."))
        if self.errors or data.get("professional") is None or data.get("at") is None:
            return data
        starts_at = _local_start(self, data["day"], data["at"], company.tz)
        if starts_at is None:
            return data
        data["starts_at"] = starts_at
        now = clock.now()
        try:
            self.booked = services.appointment_book(
                company=company,
                contact=data["contact"],
                service=data["service"],
                professional=data["professional"],
                starts_at=starts_at,
                created_via=Appointment.Via.STAFF,
                now=now,
                enforce_customer_rules=False,
            )
        except GaranteError as error:
            raise forms.ValidationError(str(error.user_message)) from None
        return data


class RescheduleForm(forms.ModelForm):
    """The reschedule button's form: a new professional, date and local time."""

    day = forms.DateField(label=_("date"), widget=admin.widgets.AdminDateWidget)
    at = forms.TimeField(label=_("time (company local)"), widget=admin.widgets.AdminTimeWidget)

    class Meta:
        model = Appointment
        fields = ["professional"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        appointment = self.instance
        self.fields["professional"].queryset = Professional.objects.filter(
            company_id=appointment.company_id, active=True, services=appointment.service_id
        )
        local = appointment.starts_at.astimezone(appointment.company.tz)
        self.fields["day"].initial = local.date()
        self.fields["at"].initial = local.time()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("day") and data.get("at"):
            starts_at = _local_start(self, data["day"], data["at"], self.instance.company.tz)
            if starts_at is not None:
                data["starts_at"] = starts_at
        return data


class AppointmentMessageInline(admin.TabularInline):
    """The messages the customer was sent about this appointment (agenda.messages), each
    with its delivery state: read-only, oldest first."""

    model = AppointmentMessage
    extra = 0
    can_delete = False
    fields = [
        "kind",
        "for_time",
        "channel",
        "masked_destination",
        "status",
        "due",
        "sent",
        "attempts",
        "error",
    ]
    readonly_fields = fields
    verbose_name = _("message to the customer")
    verbose_name_plural = _("messages to the customer")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # whoever may see the appointment may see what its customer was sent

    @staticmethod
    def _when(instant: datetime | None) -> str:
        # The page renders in the company's time zone (CompanyLocalTimeMixin).
        if instant is None:
            return "—"
        return formats.date_format(timezone.localtime(instant), "SHORT_DATETIME_FORMAT")

    @admin.display(description=_("for the appointment at"))
    def for_time(self, message: AppointmentMessage) -> str:
        return self._when(message.starts_at)

    @admin.display(description=_("due"))
    def due(self, message: AppointmentMessage) -> str:
        return self._when(message.due_at)

    @admin.display(description=_("sent"))
    def sent(self, message: AppointmentMessage) -> str:
        return self._when(message.sent_at)


@admin.register(Appointment)
class AppointmentAdmin(CsvExportAdmin, ServiceTransitionsAdmin, CompanyScopedAdmin):
    export_fields = [
        "reference",
        "starts_at",
        "ends_at",
        "state",
        "service__name",
        "professional__display_name",
        "contact__first_name",
        "contact__last_name",
        "contact__phone",
        "contact__email",
        "created_via",
    ]
    fsm_services = {
        "cancel": lambda a, user: services.appointment_cancel(
            company=a.company, reference=a.reference, enforce_cutoff=False, by=user
        ),
        "mark_attended": lambda a, user: services.appointment_mark_attended(
            company=a.company, reference=a.reference, by=user
        ),
        "mark_no_show": lambda a, user: services.appointment_mark_no_show(
            company=a.company, reference=a.reference, by=user
        ),
        "reschedule": lambda a, user, starts_at, professional=None, **_form: (
            services.appointment_reschedule(
                company=a.company,
                reference=a.reference,
                starts_at=starts_at,
                professional=professional,
                enforce_customer_rules=False,
                by=user,
            )
        ),
    }
    fsm_forms = {"reschedule": RescheduleForm}
    autocomplete_fields = ["contact", "service", "professional"]
    list_display = [
        "reference",
        "local_start",
        "professional",
        "service",
        "contact",
        "state",
        "created_via",
    ]
    list_filter = ["state", "created_via", "professional", "company"]
    list_select_related = ["company", "professional", "service", "contact"]
    search_fields = [
        "reference",
        "contact__first_name",
        "contact__last_name",
        "contact__document_number",
        "contact__phone",
        "contact__email",
    ]
    date_hierarchy = "starts_at"
    ordering = ["-starts_at"]
    inlines = [TransitionHistoryInline, AppointmentMessageInline]
    readonly_fields = [
        "reference",
        "company",
        "contact",
        "service",
        "professional",
        "local_start",
        "local_end",
        "state",
        "created_via",
        "conversation",
        "created_at",
        "updated_at",
    ]

    @admin.display(description=_("starts (local)"), ordering="starts_at")
    def local_start(self, appointment: Appointment) -> str:
        return _local(appointment.starts_at, appointment.company)

    @admin.display(description=_("ends (local)"))
    def local_end(self, appointment: Appointment) -> str:
        return _local(appointment.ends_at, appointment.company)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        if obj is None:
            kwargs["form"] = AppointmentAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return ["company", "contact", "service", "professional", "day", "at"]
        return self.readonly_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        return tuple(self.readonly_fields) if obj is not None else ()

    def get_inlines(self, request: HttpRequest, obj: Any) -> list:
        return self.inlines if obj is not None else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # appointments are cancelled, never deleted: the history stays

    def save_model(self, request: HttpRequest, obj: Appointment, form: Any, change: bool) -> None:
        if change:
            return  # nothing is edited in place; changes are transitions
        appointment = form.booked  # booked by the form's validation (AppointmentAddForm)
        # The admin goes on with `obj` (redirect, log entry): make it the appointment booked.
        obj.pk = appointment.pk
        obj.reference = appointment.reference
        obj._state.adding = False

    def fsm_done_message(self, appointment: Appointment) -> str:
        return _("Appointment %(reference)s is now %(state)s, %(start)s.") % {
            "reference": appointment.reference,
            "state": appointment.get_state_display(),
            "start": _local(appointment.starts_at, appointment.company),
        }
