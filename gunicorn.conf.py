"""gunicorn's configuration, read from the working directory by every `gunicorn` started in the
repository (the README's command, tests/servers.py, bench/load.py): the metrics of all its
workers in one place, so that a scrape of /metrics, answered by whichever worker, sums them;
and the requests gunicorn itself refuses, before Django sees them, answered in the APIs' JSON.

prometheus_client's multiprocess mode: each worker writes its values to files of its own in
PROMETHEUS_MULTIPROC_DIR and core.metrics adds them up. The variable must be set before any
worker imports prometheus_client, so it is set here, in the master, which reads this file
before it starts a worker. Set by the operator, that directory is used and emptied at start
(values of a previous run would otherwise be added to this one's); unset, a private directory
is made, and removed when the server stops.
"""

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import gunicorn.util

_made = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _made:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="garante-metrics-")
_directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
_directory.mkdir(parents=True, exist_ok=True)
for _stale in _directory.glob("*.db"):
    _stale.unlink()


def child_exit(server, worker) -> None:
    """A worker gone: its live gauges go with it (its counters stay in the sum)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    if _made:
        with contextlib.suppress(OSError):
            shutil.rmtree(_directory)


# A request gunicorn refuses before the application sees it (a header line longer than
# limit_request_field_size, 8190 bytes by default; more than limit_request_fields headers, 100;
# a request line longer than limit_request_line, 4094; a malformed request) was answered with
# gunicorn's HTML page. Every API answers JSON of the canonical error shape (core.errors), so
# these do too: same status, `error_type` VALIDATION (SYSTEM for gunicorn's own 500), a stable
# `code`, and a `user_message` in the site's default language (no company is known yet).
# gunicorn's workers all answer through gunicorn.util.write_error (gunicorn 27), which the
# workers, forked from this master, look up at each refusal; tests/security checks the answer
# over real HTTP, so an upgrade that stops calling it is noticed.
REFUSAL_CODES = {
    400: "bad_request",
    403: "forbidden",
    414: "request_line_too_long",
    417: "expectation_failed",
    431: "request_headers_too_large",
    501: "transfer_coding_not_supported",
}
REFUSAL_MESSAGES = {
    414: "La dirección de la petición es demasiado larga.",
    431: "Las cabeceras de la petición son demasiado grandes.",
}


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's refusal of a request, as JSON (the comment above)."""
    system = status_int >= 500 and status_int != 501
    body = json.dumps(
        {
            "error_type": "SYSTEM" if system else "VALIDATION",
            "code": REFUSAL_CODES.get(status_int, "internal_error" if system else "bad_request"),
            "user_message": REFUSAL_MESSAGES.get(
                status_int,
                "Ahora mismo no podemos atenderle. Inténtelo de nuevo en unos minutos."
                if system
                else "La petición no es válida.",
            ),
        },
        ensure_ascii=False,
    ).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    gunicorn.util.write_nonblock(sock, head + body)


gunicorn.util.write_error = write_json_error
