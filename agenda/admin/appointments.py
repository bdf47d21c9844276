"""Staff admin for appointments: booked in a form through the service, moved and cancelled by
transition buttons through agenda.services, with the messages their customer was sent."""

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_fsm.admin import FSMTransitionContext

from agenda import calendar_page, clock, services
from agenda.admin.common import local_shown, local_start
from agenda.appointment_messages import message_channel, reason_shown
from agenda.models import (
    Appointment,
    AppointmentMessage,
    Professional,
)
from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
    contact_search_fields,
)
from core.admin.confirmation import Confirmation, customer_told, nothing_sent
from core.errors import GaranteError
from core.l10n import datetime_shown
from core.states import state_in_sentence


def off_grid_field() -> forms.BooleanField:
    """Staff's explicit override of the slot grid: unticked, a start between the offered
    starts (17:07 on a 15-minute grid) is refused with the nearest free slots."""
    return forms.BooleanField(
        label=_("Allow a time off the slot grid"),
        required=False,
        help_text=_("Tick only on purpose: the time typed is booked even between slots."),
    )


class AppointmentAddForm(forms.ModelForm):
    """A staff booking: the date and time are read in the company's own timezone, and the
    booking is made here, by the service, so that every refusal (a slot taken a moment ago,
    in the past, outside the working hours or past the horizon) is an error in this form. Staff,
    like the service (enforce_customer_rules=False), are not held to the minimum notice. The admin
    runs the form inside its transaction: nothing stays booked if the page fails after."""

    day = forms.DateField(label=_("date"), widget=admin.widgets.AdminDateWidget)
    at = forms.TimeField(label=_("time (company local)"), widget=admin.widgets.AdminTimeWidget)
    off_grid = off_grid_field()

    class Meta:
        model = Appointment
        fields = ["company", "contact", "service", "professional", "notes"]

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
        starts_at = local_start(self, data["day"], data["at"], company.tz)
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
                grid=not data.get("off_grid"),
                notes=data.get("notes") or "",
            )
        except GaranteError as error:
            raise forms.ValidationError(str(error.user_message)) from None
        return data


class RescheduleForm(forms.ModelForm):
    """The reschedule button's form: a new professional, date and local time."""

    day = forms.DateField(label=_("date"), widget=admin.widgets.AdminDateWidget)
    at = forms.TimeField(label=_("time (company local)"), widget=admin.widgets.AdminTimeWidget)
    off_grid = off_grid_field()

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
        # The move tells the customer (agenda.appointment_messages): the form says so before
        # its button, as the confirmation pages do.
        channel, why = message_channel(appointment.contact)
        name = str(appointment.contact)
        if channel == "sms":
            told = _("%(name)s will receive an SMS with the new date and time.")
        elif channel:
            told = _("%(name)s will receive an email with the new date and time.")
        else:
            told = None
        self.fields["day"].help_text = (
            told % {"name": name} if told is not None else nothing_sent(name, why)
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("day") and data.get("at"):
            starts_at = local_start(self, data["day"], data["at"], self.instance.company.tz)
            if starts_at is not None:
                data["starts_at"] = starts_at
        return data


class AppointmentMessageInline(admin.TabularInline):
    """The messages the customer was sent about this appointment (agenda.appointment_messages), each
    with its delivery state: read-only, oldest first."""

    model = AppointmentMessage
    extra = 0
    can_delete = False
    fields = [
        "kind",
        "for_time",
        "reason",
        "channel",
        "masked_destination",
        "status",
        "due",
        "sent",
        "attempts",
        "error_shown",
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
        return datetime_shown(instant)

    @admin.display(description=_("error"))
    def error_shown(self, message: AppointmentMessage) -> str:
        return reason_shown(message.error) if message.error else "—"

    @admin.display(description=_("for the appointment at"))
    def for_time(self, message: AppointmentMessage) -> str:
        return self._when(message.starts_at)

    @admin.display(description=_("due"))
    def due(self, message: AppointmentMessage) -> str:
        return self._when(message.due_at)

    @admin.display(description=_("sent"))
    def sent(self, message: AppointmentMessage) -> str:
        return self._when(message.sent_at)


def _described(appointment: Appointment) -> str:
    return _("%(contact)s · %(service)s with %(professional)s · %(when)s") % {
        "contact": appointment.contact,
        "service": appointment.service.name,
        "professional": appointment.professional.display_name,
        "when": local_shown(appointment.starts_at, appointment.company),
    }


def _cancel_effect(appointment: Appointment) -> list[str]:
    """What cancelling does, and whether the customer is told: by the channel the
    cancellation message would take now (agenda.appointment_messages)."""
    channel, why = message_channel(appointment.contact)
    name = str(appointment.contact)
    return [
        _described(appointment),
        _("The appointment is cancelled and its time is free again."),
        customer_told(name, channel) if channel else nothing_sent(name, why),
    ]


def _no_show_effect(appointment: Appointment) -> list[str]:
    return [
        _described(appointment),
        _("The appointment is recorded as not attended."),
        nothing_sent(str(appointment.contact)),
    ]


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
        "cancel": lambda a, user, reason: services.appointment_cancel(
            company=a.company, reference=a.reference, enforce_cutoff=False, by=user, reason=reason
        ),
        "mark_attended": lambda a, user: services.appointment_mark_attended(
            company=a.company, reference=a.reference, by=user
        ),
        "mark_no_show": lambda a, user, reason: services.appointment_mark_no_show(
            company=a.company, reference=a.reference, by=user, reason=reason
        ),
        "reschedule": lambda a, user, starts_at, professional=None, off_grid=False, **_form: (
            services.appointment_reschedule(
                company=a.company,
                reference=a.reference,
                starts_at=starts_at,
                professional=professional,
                enforce_customer_rules=False,
                by=user,
                grid=not off_grid,
            )
        ),
    }
    fsm_forms = {"reschedule": RescheduleForm}
    fsm_confirmations = {
        # A move meanwhile (same state, another time) makes the confirmation stale too.
        "cancel": Confirmation(
            reasons=[
                ("customer_asked", _("At the customer's request")),
                ("professional_unavailable", _("The professional is not available")),
                ("duplicate", _("Duplicate booking")),
            ],
            effect=_cancel_effect,
            bulk_label=_("Cancel the selected appointments"),
            confirmed_against=("state", "starts_at", "professional_id"),
        ),
        "mark_no_show": Confirmation(
            reasons=[
                ("did_not_come", _("The customer did not come or warn")),
                ("too_late", _("The customer came too late to be seen")),
                ("cancelled_late", _("The customer cancelled too late")),
            ],
            effect=_no_show_effect,
            bulk_label=_("Mark the selected appointments as no-shows"),
        ),
    }
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
    search_fields = ["reference", *contact_search_fields("contact__")]
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
        return local_shown(appointment.starts_at, appointment.company)

    @admin.display(description=_("ends (local)"))
    def local_end(self, appointment: Appointment) -> str:
        return local_shown(appointment.ends_at, appointment.company)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        if obj is None:
            kwargs["form"] = AppointmentAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return [
                "company",
                "contact",
                "service",
                "professional",
                "day",
                "at",
                "off_grid",
                "notes",
            ]
        return [*self.readonly_fields, "notes"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple:
        if obj is None:
            return ()
        if self.has_change_permission(request, obj):
            return tuple(self.readonly_fields)  # the notes stay editable
        return (*self.readonly_fields, "notes")

    def get_inlines(self, request: HttpRequest, obj: Any) -> list:
        return self.inlines if obj is not None else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # appointments are cancelled, never deleted: the history stays

    def save_model(self, request: HttpRequest, obj: Appointment, form: Any, change: bool) -> None:
        if change:
            # Nothing else is edited in place (changes are transitions): the notes, by their
            # service, when they changed.
            if "notes" in form.changed_data:
                services.appointment_notes_set(
                    company=obj.company, reference=obj.reference, notes=obj.notes
                )
            return
        appointment = form.booked  # booked by the form's validation (AppointmentAddForm)
        # The admin goes on with `obj` (redirect, log entry): make it the appointment booked.
        obj.pk = appointment.pk
        obj.reference = appointment.reference
        obj._state.adding = False

    def get_urls(self) -> list:
        return [
            path(
                "<path:object_id>/move/",
                self.admin_site.admin_view(self.move_view),
                name="agenda_appointment_move",
            ),
            *super().get_urls(),
        ]

    def move_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The reschedule form, prefilled with the free slot chosen on the agenda page
        (`?professional=&day=&at=`); applied as the reschedule button applies it, through
        the service, so a slot taken meanwhile is refused with its message, never booked
        twice. Moved, the agenda of the new day shows it."""
        appointment = self.get_object(request, unquote(object_id))
        if appointment is None:
            # Django's own answer to an object that is gone: a message, then the admin index.
            return self.change_view(request, object_id)
        if not self.has_view_permission(request, appointment):
            raise PermissionDenied
        if self.settled(appointment) or not self.has_change_permission(request, appointment):
            self.refuse_settled(request, appointment)
            return redirect("admin:agenda_appointment_change", object_id=appointment.pk)
        prefilled = {k: request.GET[k] for k in ("professional", "day", "at") if k in request.GET}
        form = RescheduleForm(request.POST or None, instance=appointment, initial=prefilled)
        applied = (
            request.method == "POST"
            and form.is_valid()
            and self.apply_transition(request, appointment, "reschedule", form.cleaned_data)
        )
        if applied:
            moved = Appointment.objects.select_related("company").get(pk=appointment.pk)
            day = moved.starts_at.astimezone(moved.company.tz).date()
            return HttpResponseRedirect(
                calendar_page.calendar_url(moved.company, day, booked=moved.reference)
            )
        company = appointment.company
        with timezone.override(company.tz):
            return TemplateResponse(
                request,
                self.fsm_transition_form_template,
                {
                    **self.admin_site.each_context(request),
                    "opts": self.opts,
                    "original": appointment,
                    "transition": FSMTransitionContext(
                        name="reschedule",
                        label=_("Move %(reference)s") % {"reference": appointment.reference},
                        help_text=_(
                            "%(contact)s, %(service)s with %(professional)s, now at %(when)s. "
                            "The new time below is the slot chosen on the agenda."
                        )
                        % {
                            "contact": appointment.contact,
                            "service": appointment.service.name,
                            "professional": appointment.professional.display_name,
                            "when": local_shown(appointment.starts_at, company),
                        },
                    ),
                    "transition_form": form,
                },
            ).render()

    def fsm_done_message(self, appointment: Appointment) -> str:
        return _("Appointment %(reference)s is now %(state)s, %(start)s.") % {
            "reference": appointment.reference,
            "state": state_in_sentence(appointment.get_state_display()),
            "start": local_shown(appointment.starts_at, appointment.company),
        }
