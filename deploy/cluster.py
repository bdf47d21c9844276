"""A small scaled-out Garante on this machine (`make cluster`, `make cluster-stop`, ...).

See docs/scaling.md.

Real components on local ports, each started here as a process of our own (no system service):
the machine's PostgreSQL; PgBouncer in transaction pooling mode in front of it; two web nodes
(gunicorn, two workers each) that reach PostgreSQL only through PgBouncer; nginx round-robin in
front of them; one Celery worker per node and one beat, with Redis as broker and as the
nodes' shared state (GARANTE_REDIS_URL). Configuration files, logs, pid files and the state
file (which processes were started, by pid; the secret key and the gateway token: readable by
its owner only) are written under the cluster's directory (var/cluster/ unless
GARANTE_CLUSTER_DIR says otherwise); `stop` ends exactly the processes the state file names,
and only if each is still the process that was started.

    python -m deploy.cluster start            start, migrate, seed the sandbox; print URLs and a
                                              token (a start after a stop keeps the token)
    python -m deploy.cluster stop             stop what `start` started
    python -m deploy.cluster status           what runs, as JSON
    python -m deploy.cluster restart NAME     stop one part and start it again (node1, node2,
                                              worker1, worker2, beat, pgbouncer, nginx)
    python -m deploy.cluster manage ARGS...   manage.py against the cluster's database

Its processes get an environment of the cluster's own: nothing of the caller's but the
system's basics (PATH, HOME, the locale), so an exported DATABASE_URL or GARANTE_* setting
never reaches them. From the environment, the cluster's own variables:
GARANTE_CLUSTER_DATABASE_URL (the database the cluster uses, created if absent; default
postgres://postgres@127.0.0.1:5432/garante_cluster), GARANTE_CLUSTER_REDIS_URL (default
redis://127.0.0.1:6379/9), GARANTE_CLUSTER_PORT (a base port: nginx on it, the nodes on the next
two, PgBouncer on the third; default: free ports), GARANTE_CLUSTER_POOL_SIZE (PgBouncer's
server connections; default: docs/scaling.md's model for this machine's cores),
GARANTE_CLUSTER_LOG_LEVEL (the processes' GARANTE_LOG_LEVEL, default INFO),
GARANTE_CLUSTER_SETTINGS (the nodes' DJANGO_SETTINGS_MODULE, default config.settings). Tests and
the bench use `Cluster` directly.

Each part's configuration comes from a module of its own: deploy.pgbouncer (and its pool
model), deploy.nginx, deploy.commands (the nodes' and Celery's command lines);
deploy.processes waits for, finds again and stops what was started.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from deploy.commands import BIN, beat_command, node_command, worker_command
from deploy.nginx import nginx_configure
from deploy.pgbouncer import DIRECT_CONNECTIONS, PoolModel, pgbouncer_command, pgbouncer_configure
from deploy.processes import (
    Started,
    free_port,
    stop_started,
    wait_http,
    wait_log,
    wait_port,
    with_children,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/garante_cluster"
NODES = 2
# What the processes keep of the caller's environment: the system's basics, nothing of Garante's.
PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME")
# nginx closes a kept-alive upstream connection idle this long; each node keeps one idle
# KEEPALIVE_MARGIN_SECONDS longer. The side that closes an idle connection is nginx, always:
# a node that closed one first could do it while nginx was sending a request on it, which
# nginx answers 502 without resending (a POST is not idempotent to it). The margin covers
# gunicorn's once-a-second check and the request's way (docs/scaling.md).
UPSTREAM_KEEPALIVE_SECONDS = 60
KEEPALIVE_MARGIN_SECONDS = 5
# The per-call deadline the nodes and workers are given (GARANTE_CALL_DEADLINE_SECONDS, and
# GARANTE_DB_ANSWER_SECONDS for each exchange outside a call) and the
# longest wait on an idempotency record's lock (GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS), from which
# PgBouncer's queue wait follows (deploy.pgbouncer.PoolModel).
DB_ANSWER_SECONDS = 10.0
LOCK_WAIT_SECONDS = 5.0


@dataclass
class Cluster:
    """The cluster's layout; `start()` brings it up, `stop()` ends what it started."""

    directory: Path
    database_url: str
    redis_url: str
    nginx_port: int
    node_ports: list[int]
    pgbouncer_port: int
    # PgBouncer's server connections; None: the pool model's for this machine.
    pool_size: int | None = None
    settings_module: str = "config.settings"
    workers: int = 2
    threads: int = 4
    upstream_keepalive_seconds: int = UPSTREAM_KEEPALIVE_SECONDS
    node_keepalive_seconds: int | None = None
    db_answer_seconds: float = DB_ANSWER_SECONDS
    lock_wait_seconds: float = LOCK_WAIT_SECONDS
    log_level: str = "INFO"
    queue: str = field(default_factory=lambda: f"cluster-{uuid.uuid4().hex[:8]}")
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[Started] = field(default_factory=list)
    token: str = ""

    def __post_init__(self) -> None:
        if self.node_keepalive_seconds is None:
            self.node_keepalive_seconds = self.upstream_keepalive_seconds + KEEPALIVE_MARGIN_SECONDS
        self.pool_size = self.pool_model().server_connections

    # --- layout -------------------------------------------------------------------------

    @classmethod
    def from_environment(cls, **overrides: Any) -> "Cluster":
        base = os.environ.get("GARANTE_CLUSTER_PORT", "").strip()
        if base:
            ports = [int(base) + n for n in range(NODES + 2)]
        else:
            ports = [free_port() for _ in range(NODES + 2)]
        pool = os.environ.get("GARANTE_CLUSTER_POOL_SIZE", "").strip()
        values: dict[str, Any] = {
            "directory": cluster_directory(),
            "database_url": os.environ.get("GARANTE_CLUSTER_DATABASE_URL") or DEFAULT_DATABASE_URL,
            "redis_url": os.environ.get("GARANTE_CLUSTER_REDIS_URL") or "redis://127.0.0.1:6379/9",
            "nginx_port": ports[0],
            "node_ports": ports[1 : NODES + 1],
            "pgbouncer_port": ports[NODES + 1],
            "pool_size": int(pool) if pool else None,
            "settings_module": os.environ.get("GARANTE_CLUSTER_SETTINGS") or "config.settings",
            "log_level": os.environ.get("GARANTE_CLUSTER_LOG_LEVEL") or "INFO",
        }
        values.update(overrides)
        return cls(**values)

    def pool_model(self) -> PoolModel:
        return PoolModel.plan(
            server_cores=os.cpu_count() or 1,  # the machine's PostgreSQL: this machine's cores
            web_processes=len(self.node_ports) * self.workers,
            threads_per_process=self.threads,
            celery_processes=len(self.node_ports),  # one solo worker per node
            db_answer_seconds=self.db_answer_seconds,
            lock_wait_seconds=self.lock_wait_seconds,
            server_connections=self.pool_size,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.nginx_port}"

    @property
    def node_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.node_ports]

    @property
    def database_name(self) -> str:
        return urlsplit(self.database_url).path.lstrip("/")

    @property
    def pooled_database_url(self) -> str:
        """The database through PgBouncer, as the nodes reach it."""
        parts = urlsplit(self.database_url)
        user = parts.username or "postgres"
        return f"postgres://{user}@127.0.0.1:{self.pgbouncer_port}/{self.database_name}"

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def part_names(self) -> list[str]:
        """The parts `restart` knows, in the order `start` starts them."""
        nodes = range(1, len(self.node_ports) + 1)
        workers = [f"worker{n}" for n in nodes]
        return ["pgbouncer", *(f"node{n}" for n in nodes), *workers, "beat", "nginx"]

    def environment(self, **extra: str) -> dict[str, str]:
        """The environment of the nodes, workers and beat (production settings): the cluster's
        own, whatever the caller exported."""
        env = {name: os.environ[name] for name in PASSED_THROUGH if name in os.environ}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": self.settings_module,
                "PYTHONPATH": str(ROOT),
                "PYTHONUNBUFFERED": "1",
                "DATABASE_URL": self.pooled_database_url,
                "GARANTE_PGBOUNCER": "1",
                "CELERY_BROKER_URL": self.redis_url,
                "GARANTE_REDIS_URL": self.redis_url,
                "GARANTE_CELERY_QUEUE": self.queue,
                # The fallback bound of the process caches, for a change that sends no signal
                # (docs/scaling.md); signalled changes reach every node at once.
                "GARANTE_PROCESS_CACHE_SECONDS": "1",
                # PgBouncer's queue wait is set below the first, above the second (PoolModel).
                "GARANTE_DB_ANSWER_SECONDS": f"{self.db_answer_seconds:g}",
                "GARANTE_CALL_DEADLINE_SECONDS": f"{self.db_answer_seconds:g}",
                "GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS": str(round(self.lock_wait_seconds * 1000)),
                "DJANGO_SECRET_KEY": self.secret_key,
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DJANGO_SECURE_SSL_REDIRECT": "0",
                "DJANGO_SECURE_COOKIES": "0",
                "DJANGO_STATIC_ROOT": str(self.directory / "static"),
                "GARANTE_LOG_LEVEL": self.log_level,
                "GARANTE_SMS_BACKEND": "file",
                "GARANTE_SMS_FILE_PATH": str(self.directory / "sms"),
                "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
                "EMAIL_FILE_PATH": str(self.directory / "mail"),
            }
        )
        env.update(self.extra_env)
        env.update(extra)
        return env

    def direct_environment(self, **extra: str) -> dict[str, str]:
        """The processes' environment, straight to PostgreSQL rather than through PgBouncer:
        for migrations (session locks of their own) and manage.py commands."""
        env = self.environment(DATABASE_URL=self.database_url, **extra)
        env.pop("GARANTE_PGBOUNCER")
        return env

    # --- start --------------------------------------------------------------------------

    def start(self, *, seed: bool = True, static: bool = True) -> "Cluster":
        previous = load(self.state_file) if self.state_file.exists() else None
        if previous is not None and any(p.alive() for p in previous.processes):
            raise SystemExit(
                f"a cluster already runs from {self.directory} (`make cluster-stop` first, or"
                " `make cluster-restart NAME=...` for one part)"
            )
        kept_token = ""
        if previous is not None and previous.database_url == self.database_url:
            # The same database again: its sandbox token and its sessions stay valid.
            self.secret_key, kept_token = previous.secret_key, previous.token
        self.directory.mkdir(parents=True, exist_ok=True)
        self.processes = []
        self.token = ""
        try:
            self._database_create()
            self._database_room_check()
            self._manage("migrate", "--no-input", "-v", "0", direct=True)
            if static:  # the admin's styles and scripts, served by WhiteNoise
                self._manage("collectstatic", "--no-input", "-v", "0", direct=True)
            self._start_pgbouncer()
            if seed:
                output = self._manage(
                    "seed_sandbox",
                    "--base-url",
                    self.url,
                    "--keep-token",
                    direct=False,
                    env={"GARANTE_SANDBOX_TOKEN": kept_token},
                )
                self.token = next(
                    line.split(":", 1)[1].strip()
                    for line in output.splitlines()
                    if line.strip().startswith("Gateway token:")
                )
                self.save()
            for n, port in enumerate(self.node_ports, start=1):
                self.start_node(n, port)
            for n in range(1, len(self.node_ports) + 1):
                self.start_worker(n)
            self.start_beat()
            self._start_nginx()
            for url in [*self.node_urls, self.url]:
                self._wait_http(f"{url}/readyz")
        except BaseException:
            self.stop()
            raise
        return self

    def _run(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Started:
        # One process per part: one still running under this name (a node whose graceful stop
        # outlasted a test's wait, one a test froze) is stopped first, or it would be forgotten
        # by the state file and outlive `stop`, still serving on its --reuse-port port.
        for earlier in self.processes:
            if earlier.name == name and earlier.alive():
                stop_started(earlier)
        log = self.directory / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env or self.environment(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives `make cluster`; signalled by pid only
            )
        started = Started(name=name, pid=process.pid, command=command, log=str(log), popen=process)
        self.processes = [p for p in self.processes if p.name != name]
        self.processes.append(started)
        self.save()
        return started

    def save(self) -> None:
        """Write the state file, readable by its owner only: it holds the secret key and the
        gateway token."""
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "processes"}
        state["processes"] = [p.to_json() for p in self.processes]
        state["directory"] = str(self.directory)
        written = self.state_file.with_name(f".{self.state_file.name}.{os.getpid()}")
        descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            os.fchmod(out.fileno(), 0o600)  # a leftover file keeps its mode through O_CREAT
            out.write(json.dumps(state, indent=2))
        os.replace(written, self.state_file)

    def _database_create(self) -> None:
        import psycopg

        with psycopg.connect(self._server_url(), autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [self.database_name]
            ).fetchone()
            if not exists:
                connection.execute(f'CREATE DATABASE "{self.database_name}"')

    def _database_room_check(self) -> None:
        """PgBouncer's pool must fit in PostgreSQL's max_connections, with room for the direct
        connections (migrations, manage.py, psql)."""
        import psycopg

        with psycopg.connect(self._server_url(), autocommit=True) as connection:
            limit = int(connection.execute("SHOW max_connections").fetchone()[0])
            reserved = int(connection.execute("SHOW superuser_reserved_connections").fetchone()[0])
        room = limit - reserved - DIRECT_CONNECTIONS
        if (self.pool_size or 0) > room:
            raise SystemExit(
                f"PgBouncer's pool of {self.pool_size} server connections does not fit"
                f" PostgreSQL's max_connections ({limit}, {reserved} reserved for superusers,"
                f" {DIRECT_CONNECTIONS} kept for direct connections): set"
                " GARANTE_CLUSTER_POOL_SIZE lower or raise max_connections (docs/scaling.md)"
            )

    def _server_url(self) -> str:
        return urlunsplit(urlsplit(self.database_url)._replace(path="/postgres"))

    def _manage(self, *args: str, direct: bool, env: dict[str, str] | None = None) -> str:
        extra = env or {}
        environment = self.direct_environment(**extra) if direct else self.environment(**extra)
        result = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise SystemExit(f"manage.py {args[0]} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _start_pgbouncer(self) -> Started:
        model = self.pool_model()
        command = pgbouncer_configure(
            self.directory / "pgbouncer",
            self.database_url,
            self.pgbouncer_port,
            model.server_connections,
            query_wait_timeout=model.query_wait_timeout,
            max_client_conn=model.client_connections,
        )
        started = self._run("pgbouncer", command)
        wait_port(self.pgbouncer_port, [started], self.directory)
        return started

    def start_pgbouncer_again(self) -> Started:
        """Start PgBouncer again with the configuration it had (after a fault test stopped it)."""
        started = self._run("pgbouncer", pgbouncer_command(self.directory / "pgbouncer"))
        wait_port(self.pgbouncer_port, [started], self.directory)
        return started

    def node_environment(self, n: int) -> dict[str, str]:
        """Node `n`'s environment: the processes' own, and its gunicorn's metrics folder."""
        return self.environment(PROMETHEUS_MULTIPROC_DIR=str(self.directory / f"node{n}-metrics"))

    def start_node(self, n: int, port: int) -> Started:
        env = self.node_environment(n)
        Path(env["PROMETHEUS_MULTIPROC_DIR"]).mkdir(exist_ok=True)
        command = node_command(
            port,
            workers=self.workers,
            threads=self.threads,
            keepalive_seconds=self.node_keepalive_seconds,
        )
        return self._run(f"node{n}", command, env)

    def start_worker(self, n: int, env: dict[str, str] | None = None) -> Started:
        """Celery worker `n` (worker1 serves node 1's tasks, ...; all consume one queue)."""
        command = worker_command(n, queue=self.queue, log_level=self.log_level)
        return self._run(f"worker{n}", command, self.environment(**(env or {})))

    def start_beat(self, name: str = "beat") -> Started:
        schedule = self.directory / f"{name}-schedule"
        command = beat_command(schedule, log_level=self.log_level)
        return self._run(name, command)

    def _start_nginx(self) -> Started:
        command = nginx_configure(
            self.directory / "nginx",
            port=self.nginx_port,
            node_ports=self.node_ports,
            upstream_keepalive_seconds=self.upstream_keepalive_seconds,
            node_keepalive_seconds=self.node_keepalive_seconds,
        )
        started = self._run("nginx", command)
        wait_port(self.nginx_port, [started], self.directory)
        return started

    def _wait_http(self, url: str, watching: list[Started] | None = None) -> None:
        wait_http(url, self.processes if watching is None else watching, self.directory)

    # --- one part -----------------------------------------------------------------------

    def restart(self, name: str) -> Started:
        """Stop one part gracefully (if it runs) and start it again as `start` did; return it
        once it serves (a node's /readyz, a worker's ready line, a listening port)."""
        if name not in self.part_names:
            raise SystemExit(f"no part {name!r} in this cluster: {', '.join(self.part_names)}")
        if not any(p.alive() for p in self.processes):
            raise SystemExit(f"no part of the cluster in {self.directory} runs: `make cluster`")
        running = next((p for p in self.processes if p.name == name and p.alive()), None)
        if running is not None:
            stop_started(running)
        if name == "pgbouncer":
            return self.start_pgbouncer_again()
        if name == "nginx":
            return self._start_nginx()
        log = self.directory / f"{name}.log"
        since = log.stat().st_size if log.exists() else 0
        if name == "beat":
            started = self.start_beat()
            wait_log(started, "beat: Starting", since)
            return started
        n = int(name.removeprefix("node").removeprefix("worker"))
        if name.startswith("node"):
            started = self.start_node(n, self.node_ports[n - 1])
            self._wait_http(f"{self.node_urls[n - 1]}/readyz", [started])
            return started
        started = self.start_worker(n)
        wait_log(started, " ready.", since)
        return started

    # --- stop ---------------------------------------------------------------------------

    def process(self, name: str) -> Started:
        return next(p for p in self.processes if p.name == name)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal one process the cluster started (and its children: its session)."""
        process = self.process(name)
        if process.alive():
            with_children(process.pid, sig)

    def stop(self) -> None:
        """End every process this cluster started, the load balancer first."""
        order = ["nginx", "beat"]
        ranked = sorted(
            self.processes,
            key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name),
        )
        # pgbouncer last: the nodes' and workers' graceful stop writes through it.
        ranked.sort(key=lambda p: p.name == "pgbouncer")
        for process in ranked:
            if process.alive():
                stop_started(process)
        self.processes = [p for p in self.processes if p.alive()]
        if self.directory.exists():
            self.save()
        redis_queue_delete(self.redis_url, self.queue)


def redis_queue_delete(url: str, queue: str) -> None:
    try:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        for name in client.scan_iter(match=f"*{queue}*"):
            client.delete(name)
        client.close()
    except Exception:
        pass


def cluster_directory() -> Path:
    return Path(os.environ.get("GARANTE_CLUSTER_DIR") or ROOT / "var" / "cluster")


def load(state_file: Path) -> Cluster:
    state = json.loads(state_file.read_text())
    state["directory"] = Path(state["directory"])
    state["processes"] = [Started(**p) for p in state["processes"]]
    known = {f.name for f in fields(Cluster)}
    return Cluster(**{name: value for name, value in state.items() if name in known})


def loaded_or_exit(directory: Path) -> Cluster:
    state_file = directory / "state.json"
    if not state_file.exists():
        raise SystemExit(f"no cluster state in {directory}: `make cluster` first")
    return load(state_file)


USAGE = "usage: python -m deploy.cluster start|stop|status|restart NAME|manage ARGS..."


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    directory = cluster_directory()
    state_file = directory / "state.json"
    if command == "start":
        previous_token = load(state_file).token if state_file.exists() else ""
        cluster = Cluster.from_environment().start()
        kept = " (the previous start's, kept)" if cluster.token == previous_token else ""
        print(
            "\n".join(
                [
                    "",
                    "Garante cluster ready (stop it with `make cluster-stop`).",
                    f"  Load balancer: {cluster.url}   (nginx, round robin)",
                    *(
                        f"  Node {n}:        {url}"
                        for n, url in enumerate(cluster.node_urls, start=1)
                    ),
                    f"  PgBouncer:     {cluster.pooled_database_url}   (transaction pooling,"
                    f" {cluster.pool_size} server connections)",
                    f"  PostgreSQL:    {cluster.database_url}",
                    f"  Redis:         {cluster.redis_url}   (queue {cluster.queue})",
                    f"  MCP endpoint:  {cluster.url}/mcp",
                    f"  Gateway token: {cluster.token}{kept}",
                    f"  Admin:         {cluster.url}/admin/   (user 'admin', password 'admin'"
                    " unless changed)",
                    f"  Logs:          {cluster.directory}/*.log",
                    "  One part again: make cluster-restart NAME=node1|node2|worker1|worker2|"
                    "beat|pgbouncer|nginx",
                    '  manage.py:      make cluster-manage ARGS="createsuperuser"',
                    "",
                ]
            )
        )
        return 0
    if command == "stop":
        if not state_file.exists():
            print(f"no cluster state in {directory}: nothing to stop")
            return 0
        cluster = load(state_file)
        names = [p.name for p in cluster.processes if p.alive()]
        cluster.stop()
        print(f"stopped: {', '.join(names) or 'nothing was running'}")
        return 0
    if command == "status":
        if not state_file.exists():
            print("{}")
            return 1
        cluster = load(state_file)
        print(json.dumps({p.name: {"pid": p.pid, "alive": p.alive()} for p in cluster.processes}))
        return 0 if cluster.processes and all(p.alive() for p in cluster.processes) else 1
    if command == "restart" and len(argv) == 2:
        cluster = loaded_or_exit(directory)
        started = cluster.restart(argv[1])
        print(f"restarted: {started.name} (pid {started.pid}, log {started.log})")
        return 0
    if command == "manage" and len(argv) > 1:
        cluster = loaded_or_exit(directory)
        return subprocess.call(
            [str(BIN / "python"), "manage.py", *argv[1:]],
            cwd=ROOT,
            env=cluster.direct_environment(),
        )
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
