"""The environment compose.yaml gives Garante's processes, for running them on the host.

compose.yaml sets every Garante service's environment from one block, `x-garante-environment`,
whose values may use compose's interpolation (`${VAR}`, `${VAR:-default}`, `${VAR:?error}`).
CI's packaging step (tests/config/packaging.py) runs bin/garante with exactly that block,
interpolated from its own environment, except for the values given as overrides: the ones
that name the compose network's hosts (`postgres`, `redis`) or the image's paths.

    python -m tests.config.compose_env [KEY=VALUE ...]   # prints KEY=VALUE lines
"""

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

COMPOSE_FILE = Path(__file__).resolve().parent.parent.parent / "compose.yaml"
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:-|:\?)(?P<arg>[^}]*))?\}")


class MissingVariable(ValueError):
    """A `${VAR:?error}` (or a bare `${VAR}`) with VAR unset or empty."""


def interpolate(value: str, environ: Mapping[str, str]) -> str:
    """Compose's interpolation of one value (the forms compose.yaml uses)."""

    def replace(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        found = environ.get(name, "")
        if found:
            return found
        if op == ":-":
            return arg
        if op == ":?":
            raise MissingVariable(f"{name}: {arg}")
        return ""

    return _VARIABLE.sub(replace, value.replace("$$", "\0")).replace("\0", "$")


def compose_services() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())["services"]


def garante_environment(
    environ: Mapping[str, str], overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """x-garante-environment, interpolated from `environ`; `overrides` replace whole entries
    (and are not interpolated)."""
    block = yaml.safe_load(COMPOSE_FILE.read_text())["x-garante-environment"]
    overrides = dict(overrides or {})
    result = {}
    for name, raw in block.items():
        if name in overrides:
            result[name] = overrides.pop(name)
        else:
            result[name] = interpolate(str(raw), environ)
    result.update(overrides)  # the host's own extras (the bind address, a test's switches)
    return result


def main(arguments: list[str]) -> int:
    overrides = dict(argument.split("=", 1) for argument in arguments)
    for name, value in garante_environment(os.environ, overrides).items():
        if "\n" in value:
            raise SystemExit(f"{name}: a value holding a newline cannot be passed on")
        print(f"{name}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
