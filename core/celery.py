"""The Celery application: Redis broker, tasks discovered from every installed app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings")

app = Celery("garante")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
