"""Django settings for Garante, read from environment variables with demo-friendly defaults."""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.utils.translation import gettext_lazy as _

from config import deployment

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", False)
# Deployment (config.deployment): with DEBUG off, a missing, default or weak secret key and an
# empty host list stop the process here, with one line naming the variable.
SECRET_KEY = deployment.secret_key(os.environ, debug=DEBUG)
ALLOWED_HOSTS = deployment.allowed_hosts(os.environ, debug=DEBUG)

INSTALLED_APPS = [
    "config.admin_site.GaranteAdminConfig",  # django.contrib.admin with Garante's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_fsm",
    "django_fsm_log",
    "core",
    "tooling",
    "agenda",
    "sales",
    "support",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from /static/, not a CDN
    "ninja",  # django-ninja's own Swagger UI files, so /api/docs loads nothing from a CDN
    "integration",
]

# Django's usual stack. The browser's middleware (core.middleware: sessions, language, CSRF,
# user, messages, frame options) steps aside for the machine API's paths, which authenticate
# by bearer token and answer in the company's language.
MIDDLEWARE = [
    "config.health.HealthProbes",  # /healthz and /readyz, before Host checks and redirects
    "config.hosts.RefuseUnknownHosts",  # a Host not in ALLOWED_HOSTS: 400, one log line
    "core.request_log.RequestLogMiddleware",  # request id, timing, count, one log line
    "django.middleware.security.SecurityMiddleware",
    "tooling.middleware.MachineApiErrors",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # /static/, when no web server is in front
    "core.middleware.SessionMiddleware",
    "core.middleware.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.middleware.CsrfViewMiddleware",
    "core.middleware.AuthenticationMiddleware",
    "core.middleware.StaffLanguageMiddleware",  # staff read their company's language
    "core.middleware.MessageMiddleware",
    "core.middleware.XFrameOptionsMiddleware",
]
# The machine API: the MCP endpoint and the REST tool mirror (tooling.api) with its liveness
# probe. A path ending in "/" covers everything under it. Not the integration API (/api/v1/,
# which staff may also use with their session) nor the API's documentation pages.
GARANTE_MACHINE_API_PATHS = ("/mcp", "/api/tools/", "/api/ping")
# Every API, the machine API's paths included: errors answered in JSON, never an HTML page
# (core.middleware.api_of).
GARANTE_API_PATHS = ("/mcp", "/mcp/", "/api/")

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
# Persistent connections are checked before each request reuses them, so a worker thread
# whose connection died in a database restart reconnects instead of failing one call.
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE takes the write lock at BEGIN, so concurrent writers queue instead of failing
    # later with "database is locked"; the timeout bounds that queue.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": float(os.environ.get("GARANTE_SQLITE_BUSY_TIMEOUT_SECONDS", "20")),
        **DATABASES["default"].get("OPTIONS", {}),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # The same backend, with a bound on every wait for the server's answers (core.postgresql).
    DATABASES["default"]["ENGINE"] = "core.postgresql"
    # Parameters bound by the server, and a statement run more than this many times on a
    # connection prepared there: the same few statements run on every tool call, and parsing
    # and planning them was most of PostgreSQL's CPU (docs/performance.md). Empty turns
    # preparing off, for a pooler in transaction mode that cannot keep prepared statements.
    # The URL's own options (sslmode, application_name, ...) are kept, and win.
    _prepare_threshold = os.environ.get("GARANTE_PG_PREPARE_THRESHOLD", "2").strip()
    # Behind PgBouncer in transaction pooling (docs/scaling.md) consecutive transactions of one
    # connection run on different server connections: nothing may outlive a transaction, so no
    # prepared statements (PgBouncer 1.18 does not track them) and no server-side cursors (a
    # named cursor of `.iterator()` outside a transaction). Binding parameters stays: an
    # unnamed statement lives within one exchange.
    GARANTE_PGBOUNCER = env_bool("GARANTE_PGBOUNCER", False)
    if GARANTE_PGBOUNCER:
        _prepare_threshold = ""
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["default"]["OPTIONS"] = {
        "server_side_binding": True,
        "prepare_threshold": int(_prepare_threshold) if _prepare_threshold else None,
        **DATABASES["default"].get("OPTIONS", {}),
    }
if os.environ.get("GARANTE_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["GARANTE_TEST_DB_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "es"
LANGUAGES = [("es", _("Spanish")), ("en", _("English"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
# One date, one date-time and one time shape per language, everywhere (core.l10n).
FORMAT_MODULE_PATH = ["config.formats"]
USE_I18N = True
TIME_ZONE = "UTC"
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / (os.environ.get("DJANGO_STATIC_ROOT") or "var/static")

# The one logging configuration (core.logs), in the web, the worker and beat (config.celery): a
# console handler, readable lines by default (the demo), one JSON object per line with
# GARANTE_LOG_FORMAT=json; every field of every line masked and, within a request or a task,
# stamped with its id. GARANTE_LOG_LEVEL=WARNING drops the per-request and per-call INFO lines
# (garante.requests, garante.tools).
GARANTE_LOG_FORMAT = os.environ.get("GARANTE_LOG_FORMAT", "plain").strip().lower() or "plain"
if GARANTE_LOG_FORMAT not in ("plain", "json"):
    raise ValueError(f"GARANTE_LOG_FORMAT must be plain or json, not {GARANTE_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_context": {"()": "core.logs.RequestContextFilter"},
        "host_refused_once": {"()": "config.hosts.HostRefusedOnce"},
    },
    "formatters": {
        "plain": {
            "()": "core.logs.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "core.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": GARANTE_LOG_FORMAT,
            "filters": ["request_context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("GARANTE_LOG_LEVEL", "INFO")},
    # runserver's access lines (the demo) through the same handler and masking, rather than
    # Django's own handler for them, which writes a request's query string as it came.
    "loggers": {
        # A Host refused is one line (config.hosts), not that line and Django's "Bad Request".
        "django.request": {"filters": ["host_refused_once"]},
        "django.server": {
            "handlers": ["console"],
            "level": os.environ.get("GARANTE_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}

# Celery: Redis broker in production and CI; the demo runs tasks in process.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Every task has both time limits (seconds): at the soft one SoftTimeLimitExceeded is raised in
# it, so it can stop cleanly (a sweep after its current row, core.sweeps); at the hard one its
# pool process is killed and replaced, so a task stuck in a call that never returns cannot
# hold a worker for ever. A prefork pool (bin/garante worker) enforces them; the sweeps and
# the purges set longer ones of their own.
CELERY_TASK_SOFT_TIME_LIMIT = float(os.environ.get("GARANTE_TASK_SOFT_TIME_LIMIT_SECONDS", "60"))
CELERY_TASK_TIME_LIMIT = float(os.environ.get("GARANTE_TASK_TIME_LIMIT_SECONDS", "90"))
# Publishing must fail fast when the broker is down so the caller can answer SYSTEM: one retry
# (a pooled connection gone stale in a Redis restart), and each exchange with Redis bounded,
# for a broker that answers nothing without closing its connection (frozen, a failover, a lost
# route), where a publish would otherwise wait for ever. Longer than the consumer's BRPOP wait
# (kombu's brpop_timeout, 1 s).
GARANTE_BROKER_ANSWER_SECONDS = float(os.environ.get("GARANTE_BROKER_ANSWER_SECONDS", "2"))
_BROKER_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}
CELERY_TASK_PUBLISH_RETRY_POLICY = {**_BROKER_RETRY, "interval_max": 0.2}
CELERY_BROKER_TRANSPORT_OPTIONS = {
    **_BROKER_RETRY,
    "socket_timeout": GARANTE_BROKER_ANSWER_SECONDS,
    "socket_connect_timeout": GARANTE_BROKER_ANSWER_SECONDS,
}
# Filled by the apps, each with its own periodic tasks (core.periodic).
CELERY_BEAT_SCHEDULE: dict = {}
# A second beat started by mistake sends nothing the first has sent (core.periodic).
CELERY_BEAT_SCHEDULER = "core.periodic:ClaimingScheduler"
# The queue tasks go to when nothing routes them elsewhere (a cluster of its own on a shared
# Redis uses one of its own).
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("GARANTE_CELERY_QUEUE", "").strip() or "celery"

# State every web node must see alike (docs/scaling.md): the integration API's throttle
# counters, the process caches' invalidations, the periodic sweeps' claims. With
# GARANTE_REDIS_URL set they live in that Redis; unset, the throttle counts in process memory
# and the process caches' invalidations go through the Celery broker's Redis (none where tasks
# run in process: the demo, the tests).
GARANTE_REDIS_URL = os.environ.get("GARANTE_REDIS_URL", "").strip()
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": GARANTE_REDIS_URL,
            # One namespace per database: another deployment or test run on the same Redis
            # (its credential 1 is not ours) counts apart.
            "KEY_PREFIX": f"garante:{DATABASES['default']['NAME']}",
            # A Redis that does not answer must not hold a request: the throttle then lets
            # the request through (integration.authentication).
            "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
        }
        if GARANTE_REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "shared"}
    ),
}

EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
# The folder of Django's file backend (`make cluster` uses it): one file per message.
EMAIL_FILE_PATH = Path(os.environ.get("EMAIL_FILE_PATH") or BASE_DIR / "var" / "mail")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "127.0.0.1")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "Garante <no-reply@garante.local>")

# Identity and step-up verification (core.identity, core.verification, core.sms).
# The limits on failed identifications are set per company (Company.identify_*).
GARANTE_STEP_UP_DEFAULT_ACTIONS = ["accept_quote", "update_contact_details"]
# The actions a company without a policy row has its customer confirm with a code of their own
# (core.verification.confirmation): none; each company opts in per action (docs/tools.md).
GARANTE_CONFIRM_DEFAULT_ACTIONS: list[str] = []
GARANTE_VERIFICATION_CODE_TTL = timedelta(minutes=10)
GARANTE_VERIFICATION_MAX_ATTEMPTS = 5
GARANTE_VERIFICATION_VALID_FOR = timedelta(
    minutes=float(os.environ.get("GARANTE_VERIFICATION_VALID_MINUTES", "15"))
)
# (codes, period): how many codes one conversation / one contact may be sent.
GARANTE_VERIFICATION_SENDS_PER_CONVERSATION = (3, timedelta(minutes=15))
GARANTE_VERIFICATION_SENDS_PER_CONTACT = (5, timedelta(hours=1))
# (codes, period): after this many codes of one contact locked by wrong guesses, no new code is
# sent to them through the tool API until the period has passed (staff may still send one):
# the hourly send limit alone allows 25 guesses an hour, day after day.
GARANTE_VERIFICATION_LOCKS_PER_CONTACT = (3, timedelta(hours=24))
# (wrong codes, period): one contact's budget of wrong guesses, over all their codes. A guesser
# who stops at four wrong guesses a code and asks for another never locks one, and had twenty
# guesses an hour; once this budget is spent, the code being guessed is locked, no new code is
# sent to the contact through the tool API until the period has passed (staff may still send
# one), and the company's staff are emailed (core.verification.budget).
GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT = (10, timedelta(hours=24))
GARANTE_VERIFICATION_QUEUE = os.environ.get("GARANTE_VERIFICATION_QUEUE") or None
GARANTE_VERIFICATION_DELIVERY_RETRIES = 5
# Appointment confirmations and reminders (agenda.appointment_messages): the queue their send
# task is published to (Celery's default one unless set).
GARANTE_AGENDA_MESSAGES_QUEUE = os.environ.get("GARANTE_AGENDA_MESSAGES_QUEUE") or None
# The site's address as customers reach it (https://garante.example.com): the links in their
# appointment messages that opt them out (agenda.opt_out) start with it; none without it.
GARANTE_PUBLIC_URL = os.environ.get("GARANTE_PUBLIC_URL", "").rstrip("/")
# The customers' pages behind the links in their messages (core.customer_links: manage an
# appointment, answer a quote): requests per (count, seconds) window per client address and per
# link, and how long a rendered form may be sent.
GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS = (
    int(os.environ.get("GARANTE_CUSTOMER_LINK_LIMIT_PER_ADDRESS", "120")),
    600,
)
GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK = (
    int(os.environ.get("GARANTE_CUSTOMER_LINK_LIMIT_PER_LINK", "40")),
    600,
)
GARANTE_CUSTOMER_LINK_FORM_MAX_AGE = 3600
GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS = float(
    os.environ.get("GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS", "2")
)
GARANTE_SMS_BACKEND = os.environ.get("GARANTE_SMS_BACKEND", "console")
GARANTE_SMS_FILE_PATH = Path(os.environ.get("GARANTE_SMS_FILE_PATH", BASE_DIR / "var" / "sms"))
GARANTE_SMS_TIMEOUT_SECONDS = float(os.environ.get("GARANTE_SMS_TIMEOUT_SECONDS", "10"))
GARANTE_TWILIO_API_URL = os.environ.get("GARANTE_TWILIO_API_URL", "https://api.twilio.com")
GARANTE_TWILIO_ACCOUNT_SID = os.environ.get("GARANTE_TWILIO_ACCOUNT_SID", "")
GARANTE_TWILIO_AUTH_TOKEN = os.environ.get("GARANTE_TWILIO_AUTH_TOKEN", "")
GARANTE_TWILIO_FROM = os.environ.get("GARANTE_TWILIO_FROM", "")

# The tool API.
GARANTE_MCP_MAX_BODY_BYTES = int(os.environ.get("GARANTE_MCP_MAX_BODY_BYTES", str(1024 * 1024)))
GARANTE_MCP_ALLOWED_ORIGINS = [
    o for o in os.environ.get("GARANTE_MCP_ALLOWED_ORIGINS", "").split(",") if o
]
GARANTE_OUTPUT_MAX_CHARS = 3000
# Read-mostly values (a gateway token's company, the service catalogue) are kept per process
# this many seconds (core.process_cache; 0: read the database every time). A change takes
# effect at once in the process that makes it; in the others at their next request where the
# processes share a Redis (GARANTE_REDIS_URL, else the Celery broker's), and within this many
# seconds whatever happens (a change made in SQL, a Redis lost): so a revoked gateway token is
# refused everywhere within 1 s. Each process then reads a token's row once a second at most
# (docs/performance.md, "What revocation within 1 s costs").
GARANTE_PROCESS_CACHE_SECONDS = float(os.environ.get("GARANTE_PROCESS_CACHE_SECONDS", "1"))
GARANTE_IDEMPOTENCY_REPLAY_WINDOW = timedelta(
    days=float(os.environ.get("GARANTE_IDEMPOTENCY_REPLAY_DAYS", "7"))
)
GARANTE_IDEMPOTENCY_TOMBSTONE_PERIOD = timedelta(
    days=float(os.environ.get("GARANTE_IDEMPOTENCY_TOMBSTONE_DAYS", "30"))
)
# How long a duplicate waits for the first execution of the same key before CONFLICT.
GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = int(
    os.environ.get("GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS", "5000")
)
GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS = 2
# How long the web server's processes wait for each answer of PostgreSQL (connecting, a
# statement, a commit) before the call fails as an outage (core.postgresql, config.wsgi); 0: no
# bound. Waits a healthy server makes (a row a staff member holds for a moment) end well within
# it, and it is longer than the idempotency lock wait above, so a duplicate still hears
# CONFLICT from the server.
GARANTE_DB_ANSWER_SECONDS = float(
    os.environ.get(
        "GARANTE_DB_ANSWER_SECONDS", max(10, GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS / 1000 + 1)
    )
)
# One tool call's answer, from its arrival at the proxy (nginx's X-Request-Start) or at the
# node: its database exchanges, lock waits and queueing all end within it (SYSTEM past it).
# Not shorter than the idempotency lock wait, so a duplicate still hears CONFLICT; PgBouncer's
# query_wait_timeout and the proxy's read timeout are set from it (docs/scaling.md).
GARANTE_CALL_DEADLINE_SECONDS = float(
    os.environ.get("GARANTE_CALL_DEADLINE_SECONDS", GARANTE_DB_ANSWER_SECONDS)
)
# The conversation trace (tooling.trace): tool calls older than this are trimmed daily.
GARANTE_TRACE_RETENTION_DAYS = float(os.environ.get("GARANTE_TRACE_RETENTION_DAYS", "30"))
# Bookkeeping (trace rows, replay counters) is written in batches this often, off the request
# path (core.deferred); 0 writes each row at once, in the request.
GARANTE_DEFERRED_WRITE_SECONDS = float(os.environ.get("GARANTE_DEFERRED_WRITE_SECONDS", "0.5"))

# The integration API (/api/v1/, DRF) for the company's other systems; see integration/.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "integration.authentication.IntegrationTokenAuthentication",
        "integration.authentication.StaffSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["integration.authentication.HasCompanyAccess"],
    "DEFAULT_THROTTLE_CLASSES": ["integration.authentication.CredentialRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "integration": os.environ.get("GARANTE_INTEGRATION_RATE", "1000/minute")
    },
    "DEFAULT_PARSER_CLASSES": ["integration.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "integration.pagination.Pagination",
    "PAGE_SIZE": 20,
    "EXCEPTION_HANDLER": "integration.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: it would send the schema's URL to an outside service.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "TITLE": "Garante integration API",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
}


# --- Production: behind a TLS proxy, static files, health probes (config.deployment,
# config.health, docs/operations.md). Every value comes from the environment; with DEBUG off
# the cookies are Secure and plain HTTP is redirected unless the operator turns them off.
_proxy = deployment.proxy_settings(os.environ, debug=DEBUG)
CSRF_TRUSTED_ORIGINS = _proxy["CSRF_TRUSTED_ORIGINS"]
SECURE_PROXY_SSL_HEADER = _proxy["SECURE_PROXY_SSL_HEADER"]
USE_X_FORWARDED_HOST = _proxy["USE_X_FORWARDED_HOST"]
SECURE_SSL_REDIRECT = _proxy["SECURE_SSL_REDIRECT"]
SESSION_COOKIE_SECURE = _proxy["SESSION_COOKIE_SECURE"]
CSRF_COOKIE_SECURE = _proxy["CSRF_COOKIE_SECURE"]
SECURE_HSTS_SECONDS = _proxy["SECURE_HSTS_SECONDS"]
SECURE_HSTS_INCLUDE_SUBDOMAINS = _proxy["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
SECURE_HSTS_PRELOAD = _proxy["SECURE_HSTS_PRELOAD"]
# WhiteNoise serves what collectstatic gathered (at the image's build), compressed; without
# hashed names, so pages render before any collectstatic (the tests, a fresh checkout).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# The demo (DEBUG on) serves the apps' files straight from their folders.
WHITENOISE_USE_FINDERS = DEBUG
# MIDDLEWARE holds core.middleware's subclasses of Django's CSRF and frame-options middleware,
# which Django's deployment checks look for by name: config.checks checks them instead.
SILENCED_SYSTEM_CHECKS = ["security.W002", "security.W003"]
# /readyz answers within this bound whatever the database or the broker do (config.health).
GARANTE_READY_TIMEOUT_SECONDS = float(os.environ.get("GARANTE_READY_TIMEOUT_SECONDS", "1.5"))

# --- Observability: metrics, request ids, error reports (docs/operations.md) ----------------
# Every request is timed, counted and logged with its id (core.request_log, in MIDDLEWARE after
# the probes and the Host check); these paths are answered without a line or a count.
GARANTE_QUIET_PATHS = ("/healthz", "/readyz", "/metrics")
# GET /metrics (Prometheus text, core.metrics) for `Authorization: Bearer <this>`; unset: the
# endpoint is off (404). Several gunicorn workers are summed through PROMETHEUS_MULTIPROC_DIR,
# which the repository's gunicorn.conf.py sets.
GARANTE_METRICS_TOKEN = os.environ.get("GARANTE_METRICS_TOKEN", "").strip()
# Error reports to Sentry when SENTRY_DSN is set, with no personal data (config.sentry).
SENTRY_DSN = os.environ.get("SENTRY_DSN", "").strip()
if SENTRY_DSN:
    from config.sentry import sentry_init

    sentry_init(
        dsn=SENTRY_DSN,
        environment=os.environ.get("SENTRY_ENVIRONMENT", "production"),
        traces_sample_rate=float(os.environ.get("SENTRY_TRACES_SAMPLE_RATE", "0")),
    )
# --- end of observability ---------------------------------------------------------------------
