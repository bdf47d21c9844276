"""Agenda models: the services a company offers (professionals, schedules and appointments)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Company


class Service(models.Model):
    """Something a customer can book: a duration plus buffers kept free around it."""

    company = models.ForeignKey(Company, on_delete=models.CASCADE, related_name="services")
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
        ]

    def __str__(self) -> str:
        return self.name
