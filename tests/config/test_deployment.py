"""Secure by default: with DEBUG off the processes refuse an insecure key or an empty host list
in one line naming the variable; `check --deploy` is clean with the documented production
environment (.env.example), which lists every setting the code reads."""

import os
import re
import secrets
import subprocess
import sys

import pytest

from config import deployment
from config.deployment import InsecureSettings
from tests.config.environment import ENV_EXAMPLE, ENV_READ, ROOT, documented_environment

GOOD_KEY = secrets.token_urlsafe(50)


def django_process(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    """`manage.py <arguments>` with config.settings and only the given Django variables."""
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "GARANTE_", "CELERY_", "EMAIL_"))
    }
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


# The settings functions, environment by environment ---------------------------------------


@pytest.mark.parametrize(
    ("key", "named"),
    [
        (None, "is not set"),
        ("", "is not set"),
        (deployment.DEMO_SECRET_KEY, "is the insecure demo default"),
        ("django-insecure-" + "k" * 60, "is the insecure demo default"),
        ("short-key", "is too short"),
        ("a" * 80, "is too short or too uniform"),
    ],
)
def test_debug_off_refuses_a_missing_default_or_weak_key(key, named):
    environ = {} if key is None else {"DJANGO_SECRET_KEY": key}
    with pytest.raises(InsecureSettings, match=f"^DJANGO_SECRET_KEY {named}"):
        deployment.secret_key(environ, debug=False)


def test_a_real_key_is_taken_and_debug_on_falls_back_to_the_demo_key():
    assert deployment.secret_key({"DJANGO_SECRET_KEY": GOOD_KEY}, debug=False) == GOOD_KEY
    assert deployment.secret_key({}, debug=True) == deployment.DEMO_SECRET_KEY


def test_debug_off_refuses_no_allowed_host():
    for environ in ({}, {"DJANGO_ALLOWED_HOSTS": " , "}):
        with pytest.raises(InsecureSettings, match=r"^DJANGO_ALLOWED_HOSTS is empty"):
            deployment.allowed_hosts(environ, debug=False)
    hosts = {"DJANGO_ALLOWED_HOSTS": "garante.example.com, 10.0.0.5"}
    assert deployment.allowed_hosts(hosts, debug=False) == ["garante.example.com", "10.0.0.5"]
    assert deployment.allowed_hosts({}, debug=True) == []  # Django then allows localhost


def test_https_is_on_by_default_with_debug_off_and_the_proxy_header_only_when_set():
    production = deployment.proxy_settings({}, debug=False)
    assert production["SECURE_SSL_REDIRECT"] is True
    assert production["SESSION_COOKIE_SECURE"] is production["CSRF_COOKIE_SECURE"] is True
    assert production["SECURE_PROXY_SSL_HEADER"] is None
    assert production["SECURE_HSTS_SECONDS"] == 0
    demo = deployment.proxy_settings({}, debug=True)
    assert demo["SECURE_SSL_REDIRECT"] is demo["SESSION_COOKIE_SECURE"] is False
    behind = deployment.proxy_settings(documented_environment(), debug=False)
    assert behind["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert behind["CSRF_TRUSTED_ORIGINS"] == ["https://garante.example.com"]
    assert behind["SECURE_HSTS_SECONDS"] == 31536000


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"DJANGO_CSRF_TRUSTED_ORIGINS": "garante.example.com"}, "DJANGO_CSRF_TRUSTED_ORIGINS"),
        ({"DJANGO_SECURE_SSL_REDIRECT": "maybe"}, "DJANGO_SECURE_SSL_REDIRECT"),
    ],
)
def test_a_malformed_proxy_setting_is_refused_by_name(environ, named):
    with pytest.raises(InsecureSettings, match=f"^{named}"):
        deployment.proxy_settings(environ, debug=False)


# The processes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DJANGO_ALLOWED_HOSTS": "garante.example.com"}, "DJANGO_SECRET_KEY"),
        (
            {"DJANGO_ALLOWED_HOSTS": "garante.example.com", "DJANGO_SECRET_KEY": "too-short"},
            "DJANGO_SECRET_KEY",
        ),
        ({"DJANGO_SECRET_KEY": GOOD_KEY}, "DJANGO_ALLOWED_HOSTS"),
    ],
)
def test_manage_py_refuses_to_start_in_one_line_naming_the_variable(env, variable):
    done = django_process(env, "check")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"Garante refuses to start: {variable} ")
    assert "Traceback" not in done.stderr


def test_the_web_server_refuses_to_start_without_a_key():
    """gunicorn halts ("Worker failed to boot") instead of serving on a guessable key."""
    done = subprocess.run(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", "127.0.0.1:0"],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_ALLOWED_HOSTS": "garante.example.com",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in done.stderr
    assert "Worker failed to boot" in done.stderr


def test_check_deploy_is_clean_with_the_documented_production_environment():
    env = {**documented_environment(), "DJANGO_SECRET_KEY": GOOD_KEY}
    done = django_process(env, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout
    assert "WARNING" not in done.stderr + done.stdout


def test_check_deploy_still_warns_without_the_https_settings():
    """The clean result above comes from the settings, not from silencing the checks."""
    env = {"DJANGO_SECRET_KEY": GOOD_KEY, "DJANGO_ALLOWED_HOSTS": "garante.example.com"}
    env |= {"DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_SECURE_COOKIES": "0"}
    done = django_process(env, "check", "--deploy")
    for warning in ("security.W004", "security.W008", "security.W010", "garante.W016"):
        assert warning in done.stderr, done.stderr


# .env.example ----------------------------------------------------------------------------

NOT_FOR_OPERATORS = {"DJANGO_SETTINGS_MODULE", "GARANTE_TEST_DB_NAME"}


def test_the_env_example_lists_every_setting_with_a_comment():
    sources = [ROOT / "config" / "settings.py", ROOT / "config" / "deployment.py"]
    read = {name for path in sources for name in ENV_READ.findall(path.read_text())}
    read |= set(re.findall(r"\$\{(GARANTE_[A-Z_]+):-", (ROOT / "bin" / "garante").read_text()))
    read -= NOT_FOR_OPERATORS
    assert len(read) > 40  # the pattern still finds the settings
    lines = ENV_EXAMPLE.read_text().splitlines()
    documented = documented_environment()
    assert sorted(read - documented.keys()) == []
    for index, line in enumerate(lines):
        if line.strip() and not line.startswith("#"):
            assert lines[index - 1].startswith("# "), f"no comment above {line!r}"
    assert documented["DJANGO_SECRET_KEY"] == ""  # copied as is, it refuses to start
