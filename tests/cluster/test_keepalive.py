"""Kept-alive connections between nginx and the nodes (docs/scaling.md): nginx closes an idle
one before any node does, so nginx never sends a call on a connection a node is closing, which
it would answer 502 without sending it again (a POST is not idempotent to it).

The test cluster keeps the production margin between the two limits with short ones (nginx
2 s, the nodes 7 s): bursts of writes through nginx separated by idle gaps just under and
just over each limit are all answered at the first try, each with one effect, and no idle
connection is closed by a node."""

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.cluster.conftest import case_body, identified_conversation

BURST = 16  # as many as nginx keeps idle per worker (`keepalive 16`)
TIME_WAIT = "06"


def closed_by(ports: list[int]) -> set[tuple[str, str]]:
    """Connections whose end on one of `ports` closed first: TCP keeps the side that closes
    a connection first in TIME_WAIT (the kernel's /proc/net/tcp, local and remote address)."""
    closed = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if state == TIME_WAIT and int(local.split(":")[1], 16) in ports:
            closed.add((local, remote))
    return closed


def test_calls_after_idle_gaps_around_the_keep_alive_limits_meet_no_closed_connection(cluster):
    upstream, node = cluster.upstream_keepalive_seconds, cluster.node_keepalive_seconds
    assert node > upstream
    gaps = [upstream - 0.3, upstream + 0.3, node - 0.3, node + 0.3]
    conversation = identified_conversation(cluster)
    headers = {"Authorization": f"Bearer {cluster.token}", "X-Conversation-Id": conversation}
    answers: dict[str, list[int]] = {}
    closed_before = closed_by(cluster.node_ports)

    def call(http: httpx.Client, key: str) -> None:
        response = http.post(
            "/api/tools/open_case", json=case_body(key), headers={"Idempotency-Key": key}
        )
        answers.setdefault(key, []).append(response.status_code)

    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=BURST)
    with (
        httpx.Client(base_url=cluster.url, headers=headers, timeout=30, limits=limits) as http,
        ThreadPoolExecutor(max_workers=BURST) as pool,
    ):
        label = f"idle-{uuid.uuid4().hex[:6]}"
        for n, gap in enumerate([0.0, *gaps]):
            time.sleep(gap)  # every upstream connection idle this long
            keys = [f"{label}-{n}-{k}" for k in range(BURST)]
            list(pool.map(lambda key: call(http, key), keys))

    print(f"gaps {gaps}: answers {sorted({s for a in answers.values() for s in a})}")
    assert {key: statuses for key, statuses in answers.items() if statuses != [200]} == {}
    counts = dict(
        cluster.sql(
            "SELECT subject, count(*) FROM support_case WHERE subject = ANY(%s) GROUP BY subject",
            (list(answers),),
        )
    )
    assert counts == dict.fromkeys(answers, 1)
    # nginx closed every idle connection (its end waits in TIME_WAIT), no node did.
    assert closed_by(cluster.node_ports) - closed_before == set()
