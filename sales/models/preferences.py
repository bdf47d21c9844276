"""A company's sales rules (SalesSettings)."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Company


class SalesSettings(models.Model):
    """A company's sales rules; created with these defaults the first time they are needed."""

    # A lead that came in this morning should be called back today: half a working day.
    DEFAULT_LEAD_PICKUP_HOURS = 4

    company = models.OneToOneField(
        Company, on_delete=models.CASCADE, related_name="sales_settings", verbose_name=_("company")
    )
    lead_pickup_hours = models.PositiveSmallIntegerField(
        _("lead pickup time (hours)"),
        default=DEFAULT_LEAD_PICKUP_HOURS,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 30)],
        help_text=_(
            "A new lead nobody has taken this many hours after it came in is highlighted on "
            "the dashboard and in the opportunities list."
        ),
    )

    class Meta:
        verbose_name = _("sales settings")
        verbose_name_plural = _("sales settings")

    def __str__(self) -> str:
        return str(self.company)
