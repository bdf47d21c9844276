"""The environment variables Garante's processes read, and the production environment
.env.example documents: shared by the deployment, packaging, proxy-login and cluster tests."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
ENV_EXAMPLE = ROOT / ".env.example"


def documented_environment() -> dict[str, str]:
    """The KEY=VALUE lines of .env.example (quotes stripped), as compose or `set -a` read it."""
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip().strip('"')
    return values


ENV_READ = re.compile(
    r"""(?:environ(?:\.get)?\(\s*|environ\[|env_bool\(\s*|env_(?:flag|list)\(\s*\w+,\s*)"""
    r'"([A-Z][A-Z0-9_]+)"'
)


# Read by Python and Django themselves.
READ_BY_PYTHON_AND_DJANGO = {"PYTHONPATH", "PYTHONUNBUFFERED", "DJANGO_SETTINGS_MODULE"}


def variables_read() -> set[str]:
    """The environment variables Garante's processes read: the settings and the rest of
    config/, gunicorn's configuration, the management commands, bin/garante, and the ones
    Python and Django read. A variable given to a process but not in here changes nothing."""
    sources = [
        *(ROOT / "config").glob("*.py"),
        ROOT / "gunicorn.conf.py",
        *(ROOT / "core" / "management" / "commands").glob("*.py"),
    ]
    read = {name for path in sources for name in ENV_READ.findall(path.read_text())}
    read |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "bin" / "garante").read_text()))
    return read | READ_BY_PYTHON_AND_DJANGO
