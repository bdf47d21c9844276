"""The project's wiring: settings, URLs, the WSGI entry point, the Celery app and the admin
site. Nothing below imports this package; it imports the apps (docs/architecture.md)."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
