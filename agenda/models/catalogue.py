"""What a customer books (services) and from whom (professionals), with the bounds that keep one
appointment well under a day."""

from datetime import timedelta

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.models import Company

# Upper bounds that keep one appointment (duration plus buffers) well under a day, so a window
# query can bound its index range scan (MAX_BLOCKED_SPAN).
MAX_DURATION_MINUTES = 720
MAX_BUFFER_MINUTES = 240
# Longer than any appointment's blocked range can be (checked by Service's constraints), so
# "blocked_from >= window start - MAX_BLOCKED_SPAN" bounds the index scan from below.
MAX_BLOCKED_SPAN = timedelta(minutes=MAX_DURATION_MINUTES + 2 * MAX_BUFFER_MINUTES)
# How far ahead of an appointment its reminder may be set (AgendaSettings.reminder_hours_before).
MAX_REMINDER_HOURS = 720
# An appointment's staff notes, at most (Appointment.notes).
NOTES_MAX_LENGTH = 2000


class Service(models.Model):
    """Something a customer can book: a duration plus buffers kept free around it."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="services", verbose_name=_("company")
    )
    name = models.CharField(_("name"), max_length=150)
    description = models.CharField(_("description"), max_length=300, blank=True)
    duration_minutes = models.PositiveSmallIntegerField(_("duration (minutes)"), default=30)
    buffer_before_minutes = models.PositiveSmallIntegerField(
        _("buffer before (minutes)"), default=0
    )
    buffer_after_minutes = models.PositiveSmallIntegerField(_("buffer after (minutes)"), default=0)
    active = models.BooleanField(_("active"), default=True)

    class Meta:
        verbose_name = _("service")
        verbose_name_plural = _("services")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["company", "name"], name="unique_service_name"),
            models.CheckConstraint(
                condition=Q(duration_minutes__gte=5, duration_minutes__lte=MAX_DURATION_MINUTES),
                name="service_duration_range",
                violation_error_message=_("The duration must be between 5 and 720 minutes."),
            ),
            models.CheckConstraint(
                condition=Q(
                    buffer_before_minutes__lte=MAX_BUFFER_MINUTES,
                    buffer_after_minutes__lte=MAX_BUFFER_MINUTES,
                ),
                name="service_buffer_range",
                violation_error_message=_("Buffers are at most 240 minutes."),
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Professional(models.Model):
    """Someone who gives services; customers see only `display_name`."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="professionals", verbose_name=_("company")
    )
    display_name = models.CharField(
        _("name shown to customers"), max_length=100, help_text=_("For example: Ana, Dr. Ruiz.")
    )
    services = models.ManyToManyField(
        Service, related_name="professionals", blank=True, verbose_name=_("services given")
    )
    active = models.BooleanField(_("active"), default=True)

    class Meta:
        verbose_name = _("professional")
        verbose_name_plural = _("professionals")
        ordering = ["display_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "display_name"], name="unique_professional_name"
            ),
        ]

    def __str__(self) -> str:
        return self.display_name
