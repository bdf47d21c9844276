"""The command lines of Garante's own processes in the cluster: a web node (gunicorn), a Celery
worker and Celery beat, each run from this interpreter's environment."""

import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def node_command(port: int, *, workers: int, threads: int, keepalive_seconds: int) -> list[str]:
    """A web node on `port`: gunicorn's threaded workers serving config.wsgi."""
    return [
        str(BIN / "gunicorn"),
        "config.wsgi:application",
        "--worker-class",
        "gthread",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--bind",
        f"127.0.0.1:{port}",
        # A listening socket per worker: the kernel spreads nginx's connections over both.
        "--reuse-port",
        # Longer than nginx keeps them (UPSTREAM_KEEPALIVE_SECONDS): nginx closes idle ones.
        "--keep-alive",
        str(keepalive_seconds),
        "--graceful-timeout",
        "20",
        # gunicorn's control socket defaults to one path per user, which the second node
        # would find taken; the cluster signals its processes by pid and needs none.
        "--no-control-socket",
        "--log-level",
        "warning",
    ]


def worker_command(n: int, *, queue: str, log_level: str) -> list[str]:
    """Celery worker `n`, one process consuming `queue`."""
    return [
        str(BIN / "celery"),
        "-A",
        "config",
        "worker",
        "--pool=solo",
        "--queues",
        queue,
        "--hostname",
        f"node{n}-{queue}@%h",
        "--without-gossip",
        "--without-mingle",
        f"--loglevel={log_level}",
    ]


def beat_command(schedule: Path, *, log_level: str) -> list[str]:
    return [
        str(BIN / "celery"),
        "-A",
        "config",
        "beat",
        "--schedule",
        str(schedule),
        f"--loglevel={log_level}",
    ]
