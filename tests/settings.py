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

from config.settings import *  # noqa: E402, F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]  # noqa: F405  (test-only tools)
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
CELERY_TASK_ALWAYS_EAGER = True
REDIS_AVAILABLE = _reachable("127.0.0.1", 6379)
# Quiet unless a test's server asks for its INFO lines (tests/config/test_logs.py).
LOGGING["root"]["level"] = os.environ.get("GARANTE_LOG_LEVEL", "WARNING")  # noqa: F405
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
