"""Secret calendar (ICS) URLs of a professional's or the company's appointments."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from agenda.models.catalogue import Professional
from core.models import BearerCredential, Company


class CalendarFeed(BearerCredential):
    """A secret calendar (ICS) URL for one professional's appointments, or for the whole
    company's when `professional` is empty (agenda.feeds). Its token is the URL's only
    credential: shown once, stored hashed, regenerated or revoked in the admin through
    core.credentials, like any bearer credential."""

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="calendar_feeds",
        verbose_name=_("company"),
    )
    professional = models.ForeignKey(
        Professional,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="calendar_feeds",
        verbose_name=_("professional"),
        help_text=_("Empty: every professional of the company."),
    )

    TOKEN_PREFIX = "cal_"
    ISSUE_FIELDS = ("professional",)

    class Meta:
        verbose_name = _("calendar feed")
        verbose_name_plural = _("calendar feeds")
