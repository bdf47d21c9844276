"""Kept-alive upstream connections measured (docs/scaling.md, "Keep-alive between nginx and the
nodes"): deploy/cluster.py's cluster with the keep-alive limits given, bursts of POST calls
through nginx separated by idle gaps drawn at random from a range, counting the answers by
status and the idle connections a node closed first (TIME_WAIT on the node's port).

    .venv/bin/python bench/cluster_keepalive.py --upstream 60 --node 2 --gaps 1.5:3.5
    .venv/bin/python bench/cluster_keepalive.py --upstream 2 --node 7 --gaps 1.5:8.5

Not part of `make bench`: a run is minutes of idle gaps. The database is a scratch one named
after DATABASE_URL's (`<name>_keepalive`), dropped after.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from deploy.cluster import Cluster  # noqa: E402
from deploy.processes import free_port  # noqa: E402
from tests.cluster.test_keepalive import closed_by  # noqa: E402
from tests.script_support import scratch_database  # noqa: E402

SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def measure(upstream: int, node: int, gaps: tuple[float, float], calls: int, burst: int) -> dict:
    prefix = urlsplit(os.environ.get("DATABASE_URL", "")).path.lstrip("/") or "garante"
    (ROOT / "var").mkdir(exist_ok=True)
    with (
        scratch_database(SERVER_URL, f"{prefix}_keepalive") as database_url,
        tempfile.TemporaryDirectory(prefix="garante-keepalive-", dir=ROOT / "var") as tmp,
    ):
        Path(tmp).chmod(0o755)  # PgBouncer runs as postgres when we are root
        cluster = Cluster.from_environment(
            directory=Path(tmp),
            database_url=database_url,
            redis_url="redis://127.0.0.1:6379/11",
            nginx_port=free_port(),
            node_ports=[free_port(), free_port()],
            pgbouncer_port=free_port(),
            upstream_keepalive_seconds=upstream,
            node_keepalive_seconds=node,
            log_level="WARNING",
        )
        cluster.start(static=False)
        try:
            return bursts(cluster, gaps, calls, burst)
        finally:
            cluster.stop()


def bursts(cluster: Cluster, gaps: tuple[float, float], calls: int, burst: int) -> dict:
    headers = {"Authorization": f"Bearer {cluster.token}", "X-Conversation-Id": "keepalive"}
    statuses: Counter = Counter()
    closed_before = closed_by(cluster.node_ports)
    closed: set = set()
    random.seed(47)
    limits = httpx.Limits(max_connections=burst, max_keepalive_connections=burst)
    started = time.monotonic()
    with (
        httpx.Client(base_url=cluster.url, headers=headers, timeout=30, limits=limits) as http,
        ThreadPoolExecutor(max_workers=burst) as pool,
    ):

        def call(_: int) -> int:
            try:
                return http.post("/api/tools/list_services", json={}).status_code
            except httpx.TransportError:
                return 0

        list(pool.map(call, range(burst)))  # the connections opened, not counted
        while sum(statuses.values()) < calls:
            time.sleep(random.uniform(*gaps))
            closed |= closed_by(cluster.node_ports) - closed_before
            statuses.update(pool.map(call, range(burst)))
    return {
        "upstream_keepalive_seconds": cluster.upstream_keepalive_seconds,
        "node_keepalive_seconds": cluster.node_keepalive_seconds,
        "gaps_seconds": list(gaps),
        "calls": sum(statuses.values()),
        "answers_by_status": dict(sorted(statuses.items())),
        "idle_connections_closed_by_a_node": len(closed),
        "minutes": round((time.monotonic() - started) / 60, 1),
        "run": uuid.uuid4().hex[:6],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=int, required=True, help="nginx's keepalive_timeout")
    parser.add_argument("--node", type=int, required=True, help="gunicorn's --keep-alive")
    parser.add_argument("--gaps", default="1.5:3.5", help="idle gaps, seconds: low:high")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--burst", type=int, default=16)
    arguments = parser.parse_args()
    low, high = (float(x) for x in arguments.gaps.split(":"))
    result = measure(
        arguments.upstream, arguments.node, (low, high), arguments.calls, arguments.burst
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
