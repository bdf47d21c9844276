"""The processes the cluster starts, each leading a session of its own: waited for until they
serve, found again by pid, known to be still the program started (a reused pid is not it),
stopped gracefully, then killed."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

READY_SECONDS = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def executable(name: str) -> str:
    """A system program (pgbouncer, nginx), also where Debian installs it outside PATH."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        raise SystemExit(f"{name} is not installed (Debian: apt-get install -y {name})")
    return found


@dataclass
class Started:
    """One process the cluster started: enough to find it again and to know it is still it."""

    name: str
    pid: int
    command: list[str]
    log: str

    popen: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "command": self.command, "log": self.log}

    def alive(self) -> bool:
        """Running, and still the program that was started (a reused pid is not it)."""
        if self.popen is not None:  # started by this process: it knows, even before exec
            return self.popen.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        if _zombie(self.pid):
            return False
        program = Path(self.command[0]).name
        return program in " ".join(cmdline.decode(errors="replace").split("\0")[:2])


def wait_port(port: int, watching: list[Started], logs: Path) -> None:
    """Until something listens on `port`; a process of `watching` that exits ends the wait."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            check_alive(watching)
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port}; see {logs}/*.log")


def wait_http(url: str, watching: list[Started], logs: Path) -> None:
    """Until `url` answers 200; a process of `watching` that exits ends the wait."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        check_alive(watching)
        time.sleep(0.2)
    raise SystemExit(f"{url} is not ready; see {logs}/*.log")


def wait_log(started: Started, text: str, since: int) -> None:
    """Until `started` logs `text` past the offset `since` of its log."""
    log = Path(started.log)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        with log.open("rb") as read:
            read.seek(since)
            if text.encode() in read.read():
                return
        check_alive([started])
        time.sleep(0.2)
    raise SystemExit(f"{started.name} did not log {text!r}; see {log}")


def check_alive(watching: list[Started]) -> None:
    for process in watching:
        if not process.alive():
            log = Path(process.log)
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise SystemExit(f"{process.name} exited:\n{tail}")


def with_children(pid: int, sig: int) -> None:
    """Signal a process and the session it leads (every process `_run` started leads one)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop_started(process: Started, timeout: float = 30) -> None:
    """SIGTERM (a graceful stop: gunicorn finishes its requests, nginx its connections), then
    SIGKILL of its session if it lingers. A frozen (SIGSTOPped) session is woken to act on it."""
    try:
        os.kill(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with_children(process.pid, signal.SIGCONT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.alive():
        time.sleep(0.1)
    if process.alive():
        with_children(process.pid, signal.SIGKILL)
    if process.popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=10)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True
