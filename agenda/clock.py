"""The agenda's notion of "now": one function, so tests can fix the clock instead of sleeping."""

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
