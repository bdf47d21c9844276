"""Test settings: PostgreSQL when it is reachable (always on CI), SQLite otherwise.

Tests that need PostgreSQL or Redis are marked and skipped, with the reason, when absent.
"""

import os
import socket
import tempfile


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/test"
if "DATABASE_URL" not in os.environ and _reachable("127.0.0.1", 5432):
    os.environ["DATABASE_URL"] = POSTGRES_URL
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver")
# DEBUG is off here as in production, so the settings insist on a real key; the servers,
# workers and commands the tests start (tests.servers, tests/reliability, the conformance run)
# inherit these from this process's environment. They serve plain HTTP on the loopback: no
# redirect to HTTPS, no Secure cookies (a browser test logs in over http://localhost).
os.environ.setdefault(
    "DJANGO_SECRET_KEY", "garante-tests-only-secret-key-never-used-in-production-0123456789"
)
os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "0")

from config.settings import *  # noqa: E402, F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405  (test-only tools)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = True
REDIS_AVAILABLE = _reachable("127.0.0.1", 6379)
# Quiet unless a test's server asks for its INFO lines (tests/config/test_logs.py).
LOGGING["root"]["level"] = os.environ.get("GARANTE_LOG_LEVEL", "WARNING")  # noqa: F405
# No collectstatic before the tests: WhiteNoise serves the apps\' own files.
WHITENOISE_USE_FINDERS = True
# Live-server threads must not keep connections open, or the test database cannot be dropped.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
if DATABASES["default"]["ENGINE"].endswith("sqlite3") and "TEST" not in DATABASES["default"]:  # noqa: F405
    # A file, not Django's default in-memory database, which a closed connection destroys:
    # the injected outage (tooling.faults) closes the connection and opens it again.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.path.join(tempfile.gettempdir(), f"garante-test-{os.getpid()}.sqlite3")
    }
# In-process tests read trace rows and replay counters inside their own transaction: write
# them at once. The deferred writer itself is tested with this overridden.
if "GARANTE_DEFERRED_WRITE_SECONDS" not in os.environ:
    GARANTE_DEFERRED_WRITE_SECONDS = 0
