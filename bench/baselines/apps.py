"""The baselines' app: two tables, one read by a unique key and one written to."""

from django.apps import AppConfig


class BaselinesConfig(AppConfig):
    name = "bench.baselines"
    label = "baselines"
    default_auto_field = "django.db.models.BigAutoField"
