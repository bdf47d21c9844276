"""Settings of the baselines: a minimal production-like Django project on the bench database.

The same database as Garante and its persistent connections (`CONN_MAX_AGE`), with Django's
defaults otherwise: its own PostgreSQL backend, no health checks (Garante runs Django's,
CONN_HEALTH_CHECKS, whose SELECT 1 its backend pays only when the socket has input), the
security and common middleware only.
"""

import os

import dj_database_url

SECRET_KEY = "garante-bench-baselines"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
INSTALLED_APPS = ["bench.baselines"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "bench.baselines.urls"
DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=60)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
