"""A small scaled-out Garante on this machine (`make cluster`, `make cluster-stop`).

See docs/scaling.md.

Real components on local ports, each started here as a process of our own (no system service):
the machine's PostgreSQL; PgBouncer in transaction pooling mode in front of it; two web nodes
(gunicorn, two workers each) that reach PostgreSQL only through PgBouncer; nginx round-robin in
front of them; one Celery worker per node and one beat, with Redis as broker and as the
nodes' shared state (GARANTE_REDIS_URL). Configuration files, logs, pid files and the state
file (which processes were started, by pid) are written under the cluster's directory
(var/cluster/ unless GARANTE_CLUSTER_DIR says otherwise); `stop` ends exactly the processes the
state file names, and only if each is still the process that was started.

    python -m deploy.cluster start     start, migrate, seed the sandbox; print URLs and a token
    python -m deploy.cluster stop      stop what `start` started
    python -m deploy.cluster status    what runs, as JSON

From the environment: DATABASE_URL (the database the cluster uses, created if absent; default
postgres://postgres@127.0.0.1:5432/garante_cluster), GARANTE_CLUSTER_REDIS_URL (default
redis://127.0.0.1:6379/9), GARANTE_CLUSTER_PORT (a base port: nginx on it, the nodes on the next
two, PgBouncer on the third; default: free ports), GARANTE_CLUSTER_POOL_SIZE (PgBouncer's
server connections for the database, default 8), GARANTE_CLUSTER_SETTINGS (the nodes'
DJANGO_SETTINGS_MODULE, default config.settings). Tests and the bench use `Cluster` directly.
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from deploy.pgbouncer import pgbouncer_command, pgbouncer_configure
from deploy.processes import Started, executable, free_port, stop_started, with_children

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/garante_cluster"
READY_SECONDS = 90
NODES = 2


# nginx's answer to a header line past its buffers (its 494, sent as 431): the APIs' error.
HEADERS_TOO_LARGE_JSON = (
    '{"error_type": "VALIDATION", "code": "request_headers_too_large", '
    '"user_message": "Las cabeceras de la petición son demasiado grandes."}'
)


@dataclass
class Cluster:
    """The cluster's layout; `start()` brings it up, `stop()` ends what it started."""

    directory: Path
    database_url: str
    redis_url: str
    nginx_port: int
    node_ports: list[int]
    pgbouncer_port: int
    pool_size: int = 8
    settings_module: str = "config.settings"
    queue: str = field(default_factory=lambda: f"cluster-{uuid.uuid4().hex[:8]}")
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[Started] = field(default_factory=list)
    token: str = ""

    # --- layout -------------------------------------------------------------------------

    @classmethod
    def from_environment(cls, **overrides: Any) -> "Cluster":
        base = os.environ.get("GARANTE_CLUSTER_PORT", "").strip()
        if base:
            ports = [int(base) + n for n in range(NODES + 2)]
        else:
            ports = [free_port() for _ in range(NODES + 2)]
        values: dict[str, Any] = {
            "directory": Path(os.environ.get("GARANTE_CLUSTER_DIR") or ROOT / "var" / "cluster"),
            "database_url": os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
            "redis_url": os.environ.get("GARANTE_CLUSTER_REDIS_URL") or "redis://127.0.0.1:6379/9",
            "nginx_port": ports[0],
            "node_ports": ports[1 : NODES + 1],
            "pgbouncer_port": ports[NODES + 1],
            "pool_size": int(os.environ.get("GARANTE_CLUSTER_POOL_SIZE", "8")),
            "settings_module": os.environ.get("GARANTE_CLUSTER_SETTINGS") or "config.settings",
        }
        values.update(overrides)
        return cls(**values)

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

    def environment(self, **extra: str) -> dict[str, str]:
        """The environment of the nodes, workers and beat (production settings)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.pop("CELERY_TASK_ALWAYS_EAGER", None)
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
                "DJANGO_SECRET_KEY": self.secret_key,
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DJANGO_SECURE_SSL_REDIRECT": "0",
                "DJANGO_SECURE_COOKIES": "0",
                "DJANGO_STATIC_ROOT": str(self.directory / "static"),
                "GARANTE_LOG_LEVEL": os.environ.get("GARANTE_LOG_LEVEL", "WARNING"),
                "GARANTE_SMS_BACKEND": "file",
                "GARANTE_SMS_FILE_PATH": str(self.directory / "sms"),
                "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
                "EMAIL_FILE_PATH": str(self.directory / "mail"),
            }
        )
        env.update(self.extra_env)
        env.update(extra)
        return env

    # --- start --------------------------------------------------------------------------

    def start(self, *, seed: bool = True, static: bool = True) -> "Cluster":
        if self.state_file.exists() and any(p.alive() for p in load(self.state_file).processes):
            raise SystemExit(
                f"a cluster already runs from {self.directory} (make cluster-stop first)"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.processes = []
        try:
            self._database_create()
            self._manage("migrate", "--no-input", "-v", "0", direct=True)
            if static:  # the admin's styles and scripts, served by WhiteNoise
                self._manage("collectstatic", "--no-input", "-v", "0", direct=True)
            self._start_pgbouncer()
            if seed:
                output = self._manage("seed_sandbox", "--base-url", self.url, direct=False)
                self.token = next(
                    line.split(":", 1)[1].strip()
                    for line in output.splitlines()
                    if line.strip().startswith("Gateway token:")
                )
            for n, port in enumerate(self.node_ports, start=1):
                self.start_node(n, port)
            for n in range(1, NODES + 1):
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
        self.processes.append(started)
        self.save()
        return started

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "processes"}
        state["processes"] = [p.to_json() for p in self.processes]
        state["directory"] = str(self.directory)
        self.state_file.write_text(json.dumps(state, indent=2))

    def _database_create(self) -> None:
        import psycopg

        parts = urlsplit(self.database_url)
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [self.database_name]
            ).fetchone()
            if not exists:
                connection.execute(f'CREATE DATABASE "{self.database_name}"')

    def _manage(self, *args: str, direct: bool) -> str:
        env = self.environment()
        if direct:  # migrations take session locks of their own: straight to PostgreSQL
            env["DATABASE_URL"] = self.database_url
            env.pop("GARANTE_PGBOUNCER")
        result = subprocess.run(
            [str(BIN / "python"), "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise SystemExit(f"manage.py {args[0]} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def _start_pgbouncer(self) -> None:
        command = pgbouncer_configure(
            self.directory / "pgbouncer", self.database_url, self.pgbouncer_port, self.pool_size
        )
        self._run("pgbouncer", command)
        self._wait_port(self.pgbouncer_port)

    def start_pgbouncer_again(self) -> Started:
        """Start PgBouncer again with the configuration it had (after a fault test stopped it)."""
        self.processes = [p for p in self.processes if p.name != "pgbouncer"]
        started = self._run("pgbouncer", pgbouncer_command(self.directory / "pgbouncer"))
        self._wait_port(self.pgbouncer_port)
        return started

    def start_node(self, n: int, port: int) -> Started:
        self.processes = [p for p in self.processes if p.name != f"node{n}"]
        metrics = self.directory / f"node{n}-metrics"
        metrics.mkdir(exist_ok=True)
        env = self.environment(PROMETHEUS_MULTIPROC_DIR=str(metrics), GARANTE_NODE=f"node{n}")
        command = [
            str(BIN / "gunicorn"),
            "config.wsgi:application",
            "--worker-class",
            "gthread",
            "--workers",
            "2",
            "--threads",
            "4",
            "--bind",
            f"127.0.0.1:{port}",
            # A listening socket per worker: the kernel spreads nginx's connections over both.
            "--reuse-port",
            "--graceful-timeout",
            "20",
            "--log-level",
            "warning",
        ]
        started = self._run(f"node{n}", command, env)
        return started

    def start_worker(self, n: int, env: dict[str, str] | None = None) -> Started:
        """Celery worker `n` (worker1 serves node 1's tasks, ...; all consume one queue)."""
        self.processes = [p for p in self.processes if p.name != f"worker{n}"]
        command = [
            str(BIN / "celery"),
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--queues",
            self.queue,
            "--hostname",
            f"node{n}-{self.queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
        ]
        return self._run(f"worker{n}", command, self.environment(**(env or {})))

    def start_beat(self, name: str = "beat") -> Started:
        schedule = self.directory / f"{name}-schedule"
        command = [
            str(BIN / "celery"),
            "-A",
            "config",
            "beat",
            "--schedule",
            str(schedule),
            "--loglevel=INFO",
        ]
        return self._run(name, command)

    def _start_nginx(self) -> None:
        directory = self.directory / "nginx"
        for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
            (directory / sub).chmod(0o777)  # its workers may run as another user
        upstreams = "\n".join(f"        server 127.0.0.1:{p} max_fails=0;" for p in self.node_ports)
        (directory / "nginx.conf").write_text(
            f"""worker_processes 1;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {directory / "client_body"};
    proxy_temp_path {directory / "proxy"};
    fastcgi_temp_path {directory / "fastcgi"};
    uwsgi_temp_path {directory / "uwsgi"};
    scgi_temp_path {directory / "scgi"};
    client_max_body_size 2m;
    # Header lines up to 16 kB reach the nodes, so gunicorn's own limit (8190 bytes a line)
    # answers its JSON 431 (gunicorn.conf.py); longer ones are refused here, in JSON too
    # (docs/operations.md, "Oversized requests").
    large_client_header_buffers 4 16k;
    # Round robin over the nodes. A node that refuses the connection is skipped for that
    # request; a request already sent is never sent again by nginx (POST is not idempotent
    # to it): the client retries with the same Idempotency-Key and the engine joins it.
    upstream garante {{
{upstreams}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{self.nginx_port};
        error_page 494 =431 /_garante/request_headers_too_large.json;
        location = /_garante/request_headers_too_large.json {{
            internal;
            default_type application/json;
            return 431 '{HEADERS_TOO_LARGE_JSON}';
        }}
        location / {{
            proxy_pass http://garante;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            # When the call arrived: the time it waits for a node's thread counts towards its
            # deadline (GARANTE_CALL_DEADLINE_SECONDS, tooling.middleware).
            proxy_set_header X-Request-Start "t=${{msec}}";
            proxy_next_upstream error timeout;
            proxy_connect_timeout 2s;
            proxy_read_timeout 60s;
        }}
    }}
}}
"""
        )
        command = [
            executable("nginx"),
            "-p",
            str(directory),
            "-c",
            str(directory / "nginx.conf"),
            "-g",
            "daemon off;",
        ]
        self._run("nginx", command)
        self._wait_port(self.nginx_port)

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                self._check_alive()
                time.sleep(0.1)
        raise SystemExit(f"nothing listens on port {port}; see {self.directory}/*.log")

    def _wait_http(self, url: str) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            self._check_alive()
            time.sleep(0.2)
        raise SystemExit(f"{url} is not ready; see {self.directory}/*.log")

    def _check_alive(self) -> None:
        for process in self.processes:
            if not process.alive():
                log = Path(process.log)
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise SystemExit(f"{process.name} exited:\n{tail}")

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


def load(state_file: Path) -> Cluster:
    state = json.loads(state_file.read_text())
    state["directory"] = Path(state["directory"])
    state["processes"] = [Started(**p) for p in state["processes"]]
    return Cluster(**state)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    directory = Path(os.environ.get("GARANTE_CLUSTER_DIR") or ROOT / "var" / "cluster")
    state_file = directory / "state.json"
    if command == "start":
        cluster = Cluster.from_environment().start()
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
                    f"  Gateway token: {cluster.token}",
                    f"  Admin:         {cluster.url}/admin/",
                    f"  Logs:          {cluster.directory}/*.log",
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
    print("usage: python -m deploy.cluster start|stop|status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
