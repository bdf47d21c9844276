"""Staff admin for the agenda: catalogue, professionals with their hours and time off, a day view,
and appointments whose transition buttons go through agenda.services."""

from collections.abc import Callable
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

from agenda import clock, services
from agenda.availability.busy import working_intervals
from agenda.availability.check import slot_validate
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
from agenda.selectors import appointments_for_day, appointments_within_time_off
from core.admin import CompanyScopedAdmin, ServiceTransitionsAdmin, TransitionHistoryInline
from core.errors import GaranteError
from core.models import Company
from core.roles import staff_company_ids


class CompanyLocalTimeMixin:
    """Shows and reads date-times in the timezone of the company a row belongs to, not the
    server's UTC: a row's company is found through the admin's `company_path` (a time off's
    is its professional's), a new row's through what its posted form names (the company, or
    the professional), and else it is the staff member's only company. For a
    `CompanyScopedAdmin`."""

    def company_timezone(self, request: HttpRequest, obj: Any = None) -> ZoneInfo | None:
        if obj is not None:
            company_id = self.company_id_of(obj)
        else:
            company_id = self._posted_company_id(request)
        if company_id is None:
            ids = staff_company_ids(request)
            if ids is None or len(ids) != 1:
                return None  # several companies and no row to tell which: UTC
            company_id = ids[0]
        company = Company.objects.filter(pk=company_id).first()
        return company.tz if company is not None else None

    def _posted_company_id(self, request: HttpRequest) -> int | None:
        """The company of the row an add form posts, through the first step of `company_path`
        (the company itself, or e.g. the professional), if the staff member may add there."""
        first, *rest = self.company_path.split("__")
        value = request.POST.get(first, "") if request.method == "POST" else ""
        if not value.isdigit():
            return None
        if rest:
            related = self.model._meta.get_field(first).related_model
            rows = related.objects.filter(pk=int(value)).values_list("__".join(rest), flat=True)
            company_id = rows.first()
        else:
            company_id = int(value)
        allowed = self.allowed_company_ids(request, "add")
        return company_id if allowed is None or company_id in allowed else None

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        return _with_local_initial(super().get_form(request, obj, change=change, **kwargs))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        obj = self.get_object(request, object_id) if object_id else None
        return _rendered_in(
            self.company_timezone(request, obj),
            lambda: super(CompanyLocalTimeMixin, self).changeform_view(
                request, object_id, form_url, extra_context
            ),
        )

    def changelist_view(self, request, extra_context=None):
        return _rendered_in(
            self.company_timezone(request),
            lambda: super(CompanyLocalTimeMixin, self).changelist_view(request, extra_context),
        )


def _rendered_in(tz: ZoneInfo | None, view: Callable[[], HttpResponse]) -> HttpResponse:
    """The view's response, with its template rendered while `tz` is the current timezone:
    an admin page is a TemplateResponse, rendered only after the view returns, and its
    date-time widgets show their values in the timezone current then."""
    if tz is None:
        return view()
    with timezone.override(tz):
        response = view()
        if isinstance(response, TemplateResponse):
            response.render()
        return response


def _with_local_initial(form_class: type[forms.BaseForm]) -> type[forms.BaseForm]:
    """`form_class`, whose initial date-times (a row's saved values) are in the timezone
    current when the form is built: the company's, in these views."""

    def __init__(self: forms.BaseForm, *args: Any, **kwargs: Any) -> None:
        form_class.__init__(self, *args, **kwargs)
        for name, value in self.initial.items():
            if isinstance(value, datetime) and timezone.is_aware(value):
                self.initial[name] = timezone.localtime(value)

    return type(form_class)(form_class.__name__, (form_class,), {"__init__": __init__})


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
class ProfessionalAdmin(CompanyLocalTimeMixin, CompanyScopedAdmin):
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
            *super().get_urls(),
        ]

    def day_view(self, request: HttpRequest, professional_id: int) -> HttpResponse:
        """One professional's day: working hours and appointments, in local time."""
        professional = get_object_or_404(self.get_queryset(request), pk=professional_id)
        if not self.has_view_permission(request, professional):
            return HttpResponse(status=403)
        company = professional.company
        tz = company.tz
        try:
            day = date.fromisoformat(request.GET.get("date", ""))
        except ValueError:
            day = clock.now().astimezone(tz).date()
        weekly: dict[int, list] = {}
        for hours in professional.working_hours.all():
            weekly.setdefault(hours.weekday, []).append((hours.start_time, hours.end_time))
        intervals = [
            # An interval until the end of the day ends at the next day's midnight: 24:00.
            f"{_local(start, company)[-5:]}-"
            + ("24:00" if end.astimezone(tz).date() > day else _local(end, company)[-5:])
            for start, end in working_intervals(weekly, day, tz)
        ]
        appointments = [
            {
                "reference": a.reference,
                "url": reverse("admin:agenda_appointment_change", args=[a.pk]),
                "time": f"{_local(a.starts_at, company)[-5:]}-{_local(a.ends_at, company)[-5:]}",
                "service": a.service.name,
                "contact": str(a.contact),
                "state": a.get_state_display(),
            }
            for a in appointments_for_day(professional=professional, day=day)
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("%(name)s — %(day)s")
            % {"name": professional.display_name, "day": describe_instant_day(day, tz)},
            "professional": professional,
            "day": day,
            "previous_day": (day - timedelta(days=1)).isoformat(),
            "next_day": (day + timedelta(days=1)).isoformat(),
            "intervals": intervals,
            "appointments": appointments,
        }
        return TemplateResponse(request, "admin/agenda/professional_day.html", context)


def describe_instant_day(day: date, tz: ZoneInfo) -> str:
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=tz)
    described = describe_instant(noon, tz)
    return f"{described['weekday']} {described['date']}"


@admin.register(TimeOff)
class TimeOffAdmin(CompanyLocalTimeMixin, CompanyScopedAdmin):
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
    """A staff booking: the date and time are read in the company's own timezone."""

    day = forms.DateField(label=_("date"), widget=admin.widgets.AdminDateWidget)
    at = forms.TimeField(label=_("time (company local)"), widget=admin.widgets.AdminTimeWidget)

    class Meta:
        model = Appointment
        fields = ["company", "contact", "service", "professional"]

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
        try:
            # The service checks again when it books; here it becomes a form error.
            slot_validate(
                company=company,
                service=data["service"],
                professional=data["professional"],
                starts_at=data["starts_at"],
                now=clock.now(),
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
class AppointmentAdmin(CompanyLocalTimeMixin, ServiceTransitionsAdmin, CompanyScopedAdmin):
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
    search_fields = ["reference", "contact__first_name", "contact__last_name", "contact__phone"]
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
        data = form.cleaned_data
        appointment = services.appointment_book(
            company=data["company"],
            contact=data["contact"],
            service=data["service"],
            professional=data["professional"],
            starts_at=data["starts_at"],
            created_via=Appointment.Via.STAFF,
            enforce_customer_rules=False,
        )
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
