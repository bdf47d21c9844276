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


@register.filter
def headed_by(cells: list, columns: list) -> list[tuple]:
    """A dashboard row's cells, each with its column's heading (the phone layout shows it
    beside the cell, where the table's header row is out of sight)."""
    return list(zip(columns, cells, strict=False))
