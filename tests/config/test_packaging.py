"""The container files and the requirements, read as an operator's tools would: every process
compose.yaml starts is a bin/garante command with a health check wired to the probes, the
image runs as a non-root user with its static files collected, and every requirement is
pinned and installs without a compiler (the compiled speed-ups apart). CI runs the processes
themselves (tests/config/packaging.py)."""

import re
import subprocess
from pathlib import Path

import pytest

from tests.config.compose_env import (
    MissingVariable,
    compose_services,
    garante_environment,
    interpolate,
)
from tests.config.environment import documented_environment, variables_read

ROOT = Path(__file__).resolve().parent.parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_compose_interpolation_as_compose_does_it():
    environ = {"SET": "value", "EMPTY": ""}
    assert interpolate("a ${SET} b", environ) == "a value b"
    assert interpolate("${EMPTY:-fallback}/${UNSET:-x}", environ) == "fallback/x"
    assert interpolate("$${SET}", environ) == "${SET}"
    with pytest.raises(MissingVariable, match="UNSET: say it"):
        interpolate("${UNSET:?say it}", environ)


def test_compose_refuses_to_start_without_the_operators_secrets():
    for missing in ("DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "POSTGRES_PASSWORD"):
        environ = {"DJANGO_SECRET_KEY": "k", "DJANGO_ALLOWED_HOSTS": "h", "POSTGRES_PASSWORD": "p"}
        del environ[missing]
        with pytest.raises(MissingVariable, match=missing):
            garante_environment(environ)


def test_every_garante_service_runs_bin_garante_with_a_health_check_of_the_probes():
    services = compose_services()
    commands = {name: service.get("command") for name, service in services.items()}
    assert commands["migrate"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    for name in ("web", "worker", "beat"):
        assert commands[name] == [name]
        assert services[name]["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"
        }
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    for name in ("worker", "beat"):
        assert services[name]["healthcheck"]["test"] == ["CMD", "bin/garante", "ready"]
    for name in ("postgres", "redis"):
        assert "healthcheck" in services[name]
    usage = subprocess.run([ROOT / "bin" / "garante"], capture_output=True, text=True)
    assert usage.returncode == 2
    for name in ("web", "worker", "beat", "migrate", "ready"):
        assert name in usage.stderr


def test_the_compose_environment_is_documented():
    block = garante_environment(
        {"DJANGO_SECRET_KEY": "k", "DJANGO_ALLOWED_HOSTS": "h", "POSTGRES_PASSWORD": "p"}
    )
    assert sorted(set(block) - set(documented_environment())) == []


def test_every_variable_compose_gives_the_processes_is_read_by_them():
    block = garante_environment(
        {"DJANGO_SECRET_KEY": "k", "DJANGO_ALLOWED_HOSTS": "h", "POSTGRES_PASSWORD": "p"}
    )
    assert "EMAIL_HOST" in block and "DATABASE_URL" in block  # the block is read
    assert sorted(set(block) - variables_read()) == []


def test_the_image_is_slim_non_root_and_collects_its_static_files_at_build():
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert all(stage.startswith("python:") and stage.endswith("-slim") for stage in stages)
    assert re.search(r"^USER garante$", DOCKERFILE, re.MULTILINE)
    assert "pip install --only-binary=:all: -r requirements.txt" in DOCKERFILE
    assert "manage.py collectstatic" in DOCKERFILE
    assert 'ENTRYPOINT ["bin/garante"]' in DOCKERFILE
    # Nothing in either stage installs a compiler.
    assert not re.search(r"apt-get|build-essential|gcc", DOCKERFILE)


REQUIREMENT = re.compile(r"^[A-Za-z0-9_.\-]+(\[[a-z,]+\])?==[0-9][A-Za-z0-9.]*$")


@pytest.mark.parametrize(
    "name", ["requirements.txt", "requirements-dev.txt", "requirements-speedups.txt"]
)
def test_every_requirement_is_pinned(name):
    lines = [
        line.strip()
        for line in (ROOT / name).read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith("-r ")
    ]
    assert lines
    assert [line for line in lines if not REQUIREMENT.match(line)] == []


def test_the_compiled_parser_is_an_optional_speed_up():
    """gunicorn_h1c has no wheel: `make install` must not need it (gunicorn's http_parser
    'auto' uses it when installed), `make speedups` adds it."""
    assert "gunicorn_h1c" not in (ROOT / "requirements.txt").read_text()
    assert "gunicorn_h1c==" in (ROOT / "requirements-speedups.txt").read_text()
    assert "--http-parser" not in (ROOT / "bin" / "garante").read_text()
