"""Garante's core: tenancy, contacts, credentials, identity, errors and the Celery app."""

from core.celery import app as celery_app

__all__ = ["celery_app"]
