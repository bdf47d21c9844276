"""The two-node run of `make bench` (docs/scaling.md): the cluster of deploy/cluster.py
(PgBouncer in transaction pooling, two gunicorn nodes of 2 workers x 4 threads, nginx round
robin) on a database of its own, each scenario measured by wrk against one node directly and
against nginx (both nodes), with the CPU each node's workers, nginx, PgBouncer and PostgreSQL
spent per request, so that the capacity model can be checked on a machine whose cores the
two nodes share.

    .venv/bin/python bench/cluster_run.py        # this part alone; bench/load.py runs it too
    GARANTE_BENCH_TWO_NODES=0 make bench          # without it
"""

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.config import BENCH_DB, CONNECTIONS, MCP_PING, PG_SERVER, REPLAY, log  # noqa: E402
from bench.database import psql  # noqa: E402
from bench.processes import cpu_seconds, running, start_redis, worker_rss_kib  # noqa: E402
from bench.scenarios import all_scenarios, measure, prepare_conversations  # noqa: E402
from deploy.cluster import Cluster  # noqa: E402
from deploy.processes import free_port  # noqa: E402

ENABLED = os.environ.get("GARANTE_BENCH_TWO_NODES", "1") not in ("", "0")
DATABASE = f"{BENCH_DB}_cluster"
SCENARIOS = ["list_services", "open_case (first write)", REPLAY, MCP_PING]


def two_node_run(redis_url: str, names: list[str] | None = None) -> dict[str, Any]:
    """Start the cluster, measure each scenario on one node and on both; stop it."""
    wanted = [s for s in all_scenarios() if s.name in (names or SCENARIOS)]
    psql(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)', database="postgres")
    results: dict[str, Any] = {}
    (ROOT / "var").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="garante-bench-cluster-", dir=ROOT / "var") as tmp:
        Path(tmp).chmod(0o755)  # PgBouncer runs as postgres when we are root
        cluster = Cluster.from_environment(
            directory=Path(tmp),
            database_url=f"{PG_SERVER}/{DATABASE}",
            redis_url=redis_url,
            nginx_port=free_port(),
            node_ports=[free_port(), free_port()],
            pgbouncer_port=free_port(),
            extra_env={"GARANTE_LOG_LEVEL": "WARNING"},
        )
        log("two nodes: starting the cluster (PgBouncer, 2 gunicorn nodes, nginx, Celery)")
        cluster.start(static=False)
        try:
            prepare_conversations(cluster.url, cluster.token)
            for scenario in wanted:
                for label, url in (("1 node", cluster.node_urls[0]), ("2 nodes", cluster.url)):
                    results.setdefault(scenario.name, {})[label] = measured(
                        cluster, url, scenario, f"{scenario.name} [{label}]"
                    )
        finally:
            cluster.stop()
    psql(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)', database="postgres")
    return {
        "shape": "2 nodes x (gunicorn gthread, 2 workers x 4 threads) behind nginx, "
        f"PgBouncer transaction pooling ({cluster.pool_size} server connections)",
        "concurrency": CONNECTIONS,
        "scenarios": results,
    }


def measured(cluster: Cluster, url: str, scenario: Any, label: str) -> dict[str, Any]:
    """One wrk run with the CPU per request of each part of the cluster."""
    parts = {
        "node1": lambda: list(worker_rss_kib(cluster.process("node1").pid)),
        "node2": lambda: list(worker_rss_kib(cluster.process("node2").pid)),
        "nginx": lambda: [
            cluster.process("nginx").pid,
            *worker_rss_kib(cluster.process("nginx").pid),
        ],
        "pgbouncer": lambda: [cluster.process("pgbouncer").pid],
        "postgres": lambda: backends(cluster.database_name),
    }
    before = {name: cpu_seconds(pids()) for name, pids in parts.items()}
    result = measure(url, scenario, cluster.token, label=label)
    after = {name: cpu_seconds(pids()) for name, pids in parts.items()}
    requests = result["requests"] or 1
    for name in parts:
        spent = sum(value - before[name].get(pid, 0.0) for pid, value in after[name].items())
        result[f"{name}_cpu_ms"] = round(spent * 1000 / requests, 3)
    return result


def backends(database: str) -> list[int]:
    pids = psql(
        f"SELECT pid FROM pg_stat_activity WHERE datname = '{database}'"
        " AND pid <> pg_backend_pid()",
        database="postgres",
    )
    return [int(pid) for pid in pids.split()]


def render(two: dict[str, Any], one_node: dict[str, Any] | None = None) -> str:
    """The two-node table, each scenario's rows next to the main run's one-node figure."""
    lines = ["", f"Two nodes — {two['shape']}, wrk {two['concurrency']} connections"]
    header = (
        f"{'row':<44}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'node1':>7}{'node2':>7}"
        f"{'nginx':>7}{'pgb':>6}{'pg':>6}{'main run':>10}"
    )
    lines += [header, "-" * len(header)]
    for name, runs in two["scenarios"].items():
        for label, result in runs.items():
            main = (one_node or {}).get(name, {}).get("rps")
            lines.append(
                f"{f'{name} [{label}]'[:43]:<44}{result['rps']:>8.0f}{result['p50_ms']:>8.1f}"
                f"{result['p99_ms']:>8.1f}{result['node1_cpu_ms']:>7.2f}"
                f"{result['node2_cpu_ms']:>7.2f}{result['nginx_cpu_ms']:>7.2f}"
                f"{result['pgbouncer_cpu_ms']:>6.2f}{result['postgres_cpu_ms']:>6.2f}"
                f"{'' if main is None else f'{main:.0f}':>10}"
            )
    lines.append(
        "(CPU ms per request of each node's workers, nginx, PgBouncer and PostgreSQL; main "
        "run: req/s of the one-node server of the main table, straight to PostgreSQL)"
    )
    return "\n".join(lines)


def main() -> int:
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        redis = stack.enter_context(running(start_redis(Path(tmp))))
        two = two_node_run(redis.url)
    print(render(two))
    return 0


if __name__ == "__main__":
    sys.exit(main())
