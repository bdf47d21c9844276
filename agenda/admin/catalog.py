"""Staff admin for the agenda's catalogue: services, professionals with their hours and time off
(and their agenda pages), and each company's agenda settings."""

from datetime import time
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AdminTimeWidget
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agenda import clock
from agenda.admin.agenda_views import AgendaPagesMixin
from agenda.admin.common import local_shown
from agenda.models import (
    END_OF_DAY,
    AgendaSettings,
    Professional,
    Service,
    TimeOff,
    WorkingHours,
)
from agenda.selectors import appointments_within_time_off
from core.admin import (
    CompanyScopedAdmin,
)

_LISTED_IN_WARNING = 10


def warn_of_appointments_within(request: HttpRequest, time_off: TimeOff) -> None:
    """Tell staff who just saved this time off which scheduled appointments fall inside it:
    they stay booked (the customers were told) until staff reschedule or cancel them."""
    within = list(appointments_within_time_off(time_off=time_off)[: _LISTED_IN_WARNING + 1])
    if not within:
        return
    company = time_off.professional.company
    listed = ", ".join(
        f"{a.reference} ({local_shown(a.starts_at, company)}, {a.contact})"
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
class ProfessionalAdmin(AgendaPagesMixin, CompanyScopedAdmin):
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
        return local_shown(time_off.starts_at, time_off.professional.company)

    @admin.display(description=_("ends (local)"), ordering="ends_at")
    def local_end(self, time_off: TimeOff) -> str:
        return local_shown(time_off.ends_at, time_off.professional.company)

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
