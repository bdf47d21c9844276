"""WSGI entry point of the baselines (gunicorn bench.baselines.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.baselines.settings")

application = get_wsgi_application()
