"""Template tags of Garante's admin pages."""

from django import template
from django.utils import timezone

register = template.Library()


@register.simple_tag
def current_zone_name() -> str:
    """The current time zone by its name ("Europe/Madrid"), which says more than an
    abbreviation ("CET") and is what the company's settings show."""
    zone = timezone.get_current_timezone()
    return getattr(zone, "key", None) or str(zone)
