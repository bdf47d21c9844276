"""The processes a load benchmark run starts (Redis, gunicorn, the SDK server) and what it reads
off them (CPU, RSS, accepted connections)."""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.config import BENCH_DB, PYTHON, ROOT, THREADS, WORKERS, environment, free_port
from bench.database import psql
from bench.variants import MECHANISMS


@dataclass
class Process:
    popen: subprocess.Popen
    url: str
    log_path: Path

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def spawn(command: list[str], *, env: dict[str, str], log_path: Path, url: str) -> Process:
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped as a whole
        )
    return Process(popen, url, log_path)


def wait_until(process: Process, probe: str, *, body: dict | None = None, timeout: float = 60):
    """Until `probe` answers (a GET, or a POST of `body`); the process must not exit first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise RuntimeError(f"{probe} exited early:\n{process.tail()}")
        try:
            if body is None:
                httpx.get(probe, timeout=2)
            else:
                headers = {"Accept": "application/json, text/event-stream"}
                httpx.post(probe, json=body, headers=headers, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    process.stop()
    raise RuntimeError(f"{probe} did not answer in {timeout} s:\n{process.tail()}")


def start_redis(workdir: Path) -> Process:
    port = free_port()
    command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    command += ["--appendonly", "no", "--dir", str(workdir)]
    process = spawn(
        command,
        env=dict(os.environ),
        log_path=workdir / "redis.log",
        url=f"redis://127.0.0.1:{port}/0",
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"redis-server did not start:\n{process.tail()}")


def start_gunicorn(
    workdir: Path,
    broker_url: str,
    *,
    app: str = "config.wsgi:application",
    name: str = "garante",
    env: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    add: tuple[str, ...] = (),
) -> Process:
    """gunicorn in the bench's shape (gthread, WORKERS x THREADS) serving `app`: Garante as
    shipped, the baselines, or Garante with mechanisms off (`drop`/`add`: arguments taken
    out or put in, for the mechanisms that are gunicorn's)."""
    port = free_port()
    command = [PYTHON, "-m", "gunicorn", app, "--bind", f"127.0.0.1:{port}"]
    command += ["--workers", str(WORKERS), "--threads", str(THREADS), "--worker-class", "gthread"]
    # Each worker listens on a socket of its own (SO_REUSEPORT) and the kernel spreads new
    # connections over them. On one shared socket, whichever worker woke first accepted all of
    # wrk's kept-alive connections as wrk opened them at once, and served the whole run: one
    # core measured, not two.
    command += ["--reuse-port"]
    command += ["--keep-alive", "30", "--backlog", "2048", "--log-level", "warning"]
    command = [arg for arg in command if arg not in drop] + list(add)
    process = spawn(
        command,
        env=environment(CELERY_BROKER_URL=broker_url, **(env or {})),
        log_path=workdir / f"gunicorn-{name}.log",
        url=f"http://127.0.0.1:{port}",
    )
    probe = "/plain/ping" if app.startswith("bench.baselines") else "/api/ping"
    wait_until(process, f"{process.url}{probe}")
    return process


def start_baselines(workdir: Path, broker_url: str) -> Process:
    return start_gunicorn(
        workdir,
        broker_url,
        app="bench.baselines.wsgi:application",
        name="baselines",
        env={"DJANGO_SETTINGS_MODULE": "bench.baselines.settings"},
    )


def start_variant(workdir: Path, broker_url: str, off: list[str]) -> Process:
    """Garante with the mechanisms `off` turned off (bench/variants.py)."""
    env = {"DJANGO_SETTINGS_MODULE": "bench.variant_settings", "GARANTE_BENCH_OFF": ",".join(off)}
    drop: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    for name in off:
        env.update(MECHANISMS[name].env)
        drop += MECHANISMS[name].gunicorn_drop
        add += MECHANISMS[name].gunicorn_add
    return start_gunicorn(
        workdir,
        broker_url,
        app="bench.variant_wsgi:application",
        name="variant-" + "-".join(off),
        env=env,
        drop=drop,
        add=add,
    )


def start_sdk_server(workdir: Path, *, nodelay: bool) -> Process:
    """As shipped: uvicorn's workers on one socket, h11 on asyncio. Fixed: TCP_NODELAY set,
    each worker on a socket of its own as ours are (gunicorn's --reuse-port), and uvicorn's C
    parser on uvloop as ours parse with gunicorn's (bench/sdk_server.py)."""
    port = free_port()
    command = [PYTHON, "bench/sdk_server.py", "--port", str(port), "--workers", str(WORKERS)]
    if nodelay:
        command += ["--nodelay", "--reuse-port", "--fast"]
    process = spawn(
        command,
        env=environment(),
        log_path=workdir / f"sdk-{port}.log",
        url=f"http://127.0.0.1:{port}",
    )
    # A GET would open the SDK's event stream; a ping answers at once.
    wait_until(process, f"{process.url}/mcp", body={"jsonrpc": "2.0", "id": 0, "method": "ping"})
    return process


def worker_rss_kib(master_pid: int) -> dict[int, int]:
    """Resident memory (KiB) of each gunicorn worker: the master's children."""
    rss = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(master_pid):
            rss[int(fields["Pid"])] = int(fields.get("VmRSS", "0 kB").split()[0])
    return rss


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU time of each process (from /proc/<pid>/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    times = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        times[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return times


def tcp_accepted() -> int:
    """TCP connections this machine's servers have accepted since boot (PassiveOpens)."""
    lines = Path("/proc/net/snmp").read_text().splitlines()
    names, values = (line.split() for line in lines if line.startswith("Tcp:"))
    return int(dict(zip(names, values, strict=True))["PassiveOpens"])


def postgres_backends() -> list[int]:
    """The server processes serving the bench database's connections."""
    pids = psql(
        f"SELECT pid FROM pg_stat_activity WHERE datname = '{BENCH_DB}' AND pid <> pg_backend_pid()"
    )
    return [int(pid) for pid in pids.split()]


class CpuMeter:
    """CPU seconds spent by the server's workers and by PostgreSQL during one run: what a
    request costs, whatever else the machine is doing at the same time."""

    def __init__(self, master_pid: int, database: bool) -> None:
        self.master_pid = master_pid
        self.database = database

    def read(self) -> tuple[dict[int, float], dict[int, float]]:
        workers = cpu_seconds(list(worker_rss_kib(self.master_pid)))
        backends = cpu_seconds(postgres_backends()) if self.database else {}
        return workers, backends

    @staticmethod
    def spent(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(value - before.get(pid, 0.0) for pid, value in after.items())


@contextmanager
def running(process: Process) -> Iterator[Process]:
    try:
        yield process
    finally:
        process.stop()
