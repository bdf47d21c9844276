"""WSGI entry point for Garante (gunicorn config.wsgi)."""

import contextlib
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

from django.urls import Resolver404, resolve  # noqa: E402

from core.postgresql.base import bound_this_process  # noqa: E402  (after Django's set-up)

# The web server's processes wait for each answer of PostgreSQL at most this long, in every
# thread: a database that stops answering fails calls as SYSTEM instead of hanging them.
bound_this_process(settings.GARANTE_DB_ANSWER_SECONDS)

# Django imports the URLconf, and with it every view and the tool API's schemas, on a
# process's first request (about a second here). Loaded now, as the worker starts, so that
# the first calls a fresh worker takes, a burst among them, answer within their deadline.
with contextlib.suppress(Resolver404):
    resolve("/api/ping")
