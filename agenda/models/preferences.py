"""A company's booking rules (AgendaSettings)."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agenda.models.catalogue import MAX_REMINDER_HOURS
from core.models import Company


class AgendaSettings(models.Model):
    """A company's booking rules; created with these defaults the first time they are needed."""

    company = models.OneToOneField(
        Company, on_delete=models.CASCADE, related_name="agenda_settings", verbose_name=_("company")
    )
    minimum_notice_minutes = models.PositiveIntegerField(
        _("minimum notice (minutes)"),
        default=60,
        help_text=_("Customers cannot book a slot starting sooner than this."),
    )
    booking_horizon_days = models.PositiveSmallIntegerField(
        _("booking horizon (days)"),
        default=60,
        help_text=_("Customers cannot book further ahead than this."),
    )
    slot_step_minutes = models.PositiveSmallIntegerField(
        _("slot step (minutes)"), default=15, help_text=_("Distance between offered start times.")
    )
    cancellation_cutoff_minutes = models.PositiveIntegerField(
        _("cancellation cut-off (minutes)"),
        default=120,
        help_text=_(
            "Customers cannot cancel or reschedule through the agent later than this before "
            "the start. Staff can."
        ),
    )
    auto_no_show = models.BooleanField(
        _("mark no-shows automatically"),
        default=False,
        help_text=_("Appointments still scheduled after their end plus the grace become no-show."),
    )
    no_show_grace_minutes = models.PositiveIntegerField(_("no-show grace (minutes)"), default=60)
    reminder_hours_before = models.IntegerField(
        _("reminder (hours before)"),
        default=24,
        validators=[
            MinValueValidator(
                1, message=_("The reminder must be at least one hour before the appointment.")
            ),
            MaxValueValidator(
                MAX_REMINDER_HOURS,
                message=_("The reminder must be at most 720 hours (30 days) before."),
            ),
        ],
        help_text=_(
            "Customers get a reminder this many hours before their appointment (1 to 720). "
            "An appointment booked later than that gets only its confirmation."
        ),
    )
    # A feed's URL ends up in calendar apps and on phones that others may see; customers'
    # contact details leave Garante through it only when the company says so.
    feed_shows_contact_details = models.BooleanField(
        _("calendar feeds show customers' phone and email"),
        default=False,
        help_text=_(
            "Off: a calendar feed's events name the customer by first name only. On: they "
            "also carry the customer's phone and email."
        ),
    )

    class Meta:
        verbose_name = _("agenda settings")
        verbose_name_plural = _("agenda settings")
        constraints = [
            models.CheckConstraint(
                condition=Q(slot_step_minutes__gte=5, slot_step_minutes__lte=240),
                name="agenda_slot_step_range",
                violation_error_message=_("The slot step must be between 5 and 240 minutes."),
            ),
            models.CheckConstraint(
                condition=Q(booking_horizon_days__gte=1, booking_horizon_days__lte=730),
                name="agenda_horizon_range",
                violation_error_message=_("The horizon must be between 1 and 730 days."),
            ),
            # Zero or less would remind at or after the start: refused here too, for any
            # write that skips the form's validators.
            models.CheckConstraint(
                condition=Q(reminder_hours_before__gte=1)
                & Q(reminder_hours_before__lte=MAX_REMINDER_HOURS),
                name="agenda_reminder_hours_range",
                violation_error_code="reminder_hours_range",
                violation_error_message=_(
                    "The reminder must be between 1 and 720 hours before the appointment."
                ),
            ),
        ]

    def __str__(self) -> str:
        return str(self.company)
