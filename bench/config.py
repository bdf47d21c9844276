"""The load benchmark's settings (GARANTE_BENCH_* variables), targets and environment."""

import os
import secrets
import socket
import sys
import time
from datetime import date, timedelta
from pathlib import Path

from bench.variants import chosen

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results"
WRK_SCRIPT = ROOT / "bench" / "wrk" / "mcp.lua"
PYTHON = sys.executable

BENCH_DB = os.environ.get("GARANTE_BENCH_DB", "garante_bench")
PG_SERVER = os.environ.get("GARANTE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
DATABASE_URL = f"{PG_SERVER}/{BENCH_DB}"
QUICK = os.environ.get("GARANTE_BENCH_QUICK", "") not in ("", "0")
SECONDS = float(os.environ.get("GARANTE_BENCH_SECONDS", "4" if QUICK else "8"))
ROUNDS = max(3, int(os.environ.get("GARANTE_BENCH_ROUNDS", "3")))
ONLY = [name.strip() for name in os.environ.get("GARANTE_BENCH_SCENARIOS", "").split(",")]
ONLY = [name for name in ONLY if name]
# Variants of Garante, each with some mechanisms off: "a,b;c" serves one with a and b off and
# one with c off.
OFF = [chosen(group) for group in os.environ.get("GARANTE_BENCH_OFF", "").split(";")]
OFF = [group for group in OFF if group]
WARMUP_SECONDS = 2
CONNECTIONS = int(os.environ.get("GARANTE_BENCH_CONNECTIONS", "16"))
WORKERS = int(os.environ.get("GARANTE_BENCH_WORKERS", "2"))
THREADS = int(os.environ.get("GARANTE_BENCH_THREADS", "4"))
MEMORY_CALLS = 20_000
MEMORY_TOPUP_SECONDS = float(os.environ.get("GARANTE_BENCH_TOPUP_SECONDS", "150"))
# Growth sizes (rows in the table); the large idempotency load stops at its time budget.
APPOINTMENTS_SMALL, APPOINTMENTS_LARGE = 1_000, 1_000_000
RECORDS_SMALL, RECORDS_LARGE = 10_000, 10_000_000
RECORDS_BATCH = 1_000_000
RECORDS_BUDGET_SECONDS = float(os.environ.get("GARANTE_BENCH_LOAD_BUDGET", "300"))
PLAIN_ITEMS = 100_000  # rows of the plain read's table

PLAIN_READ, PLAIN_WRITE = "baseline: plain read", "baseline: plain write"
# A bare django-ninja endpoint on the baselines' server (Django's security and common
# middleware only, no Garante middleware): the yardstick of Garante's own GET /api/ping, which
# pays the project's middleware, the request log line and the metrics.
BARE_NINJA = "baseline: bare django-ninja"
API_PING = "GET /api/ping"
MCP_PING = "MCP ping (auth + envelope, no tool)"
REPLAY = "open_case (replay)"
# The ratio each scenario must reach to the row it is measured against (issue 45, item 5;
# MCP ping's and list_services' plain-read targets are issue 29's).
TARGETS = {
    API_PING: (BARE_NINJA, 0.9),
    MCP_PING: (API_PING, 0.95),
    REPLAY: (PLAIN_READ, 1.2),
    "list_services": (PLAIN_READ, 1.2),
    "find_available_slots": (PLAIN_READ, 0.5),
    "identify_contact (first write)": (PLAIN_WRITE, 0.6),
    "open_case (first write)": (PLAIN_WRITE, 0.6),
}
SDK_TARGET = 0.8  # list_services over the MCP SDK server's fastest configuration
SQL_BUDGETS = {  # SQL statements per call, at most
    REPLAY: 1,
    "list_services": 3,
    "find_available_slots": 3,
    "identify_contact (first write)": 6,
    "open_case (first write)": 5,
}
# A run in which one worker did more than this share of the workers' CPU is measured again
# (at most BALANCE_ATTEMPTS runs in all): see measure().
BALANCED_SHARE = 0.65
BALANCE_ATTEMPTS = 3
GROWTH_TARGET = 1.5
RSS_TARGET = 0.10

CUSTOMER = "12345678Z"  # Ana, a sandbox contact (core/management/commands/seed_sandbox.py)
# Every call opens a case for the same customer, as an agent does once the customer says it is
# another problem (`new_case`): without it the second call within the company's window is
# CONFLICT possible_duplicate (docs/tools.md, "Above the key"). A customer's first case costs
# the same statements: its check rides on the case's INSERT.
CASE_ARGS = {
    "identifier": CUSTOMER,
    "subject": "No funciona",
    "description": "Prueba de carga.",
    "new_case": True,
}
CASE_CONVERSATIONS = 64  # a pool of identified conversations opening cases


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Production settings refuse to start without a real key, and redirect plain HTTP to HTTPS
# unless told that nothing in front terminates TLS (the bench talks plain HTTP on loopback).
SERVER_ENV = {
    "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(50),
    "DJANGO_SECURE_SSL_REDIRECT": "0",
}


def in_process_environment() -> None:
    """For a script that runs Garante in process against the bench's database
    (bench/cpu_breakdown.py, bench/middleware_cost.py), before Django is set up: the shipped
    settings, the bench database, the test client's host and the servers' environment."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DATABASE_URL", DATABASE_URL)
    os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
    os.environ.update(SERVER_ENV)


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": DATABASE_URL,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
            "GARANTE_SMS_BACKEND": "console",
            "PYTHONPATH": str(ROOT),
            **SERVER_ENV,
        }
    )
    env.update(extra)
    return env


def next_monday() -> str:
    today = date.today()
    return (today + timedelta(days=7 - today.weekday())).isoformat()
