"""The cluster as an operator runs it (docs/scaling.md): one part restarted by its command while
the others serve, manage.py against the cluster, beat's decisions in its log at the cluster's
default level, and a second start that keeps the sandbox's gateway token."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import redis

from deploy.cluster import ROOT, load
from tests.cluster.conftest import case_body, identified_conversation, tool
from tests.servers import wait_for


def cluster_command(cluster, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m deploy.cluster ...` as `make cluster-restart` / `cluster-manage` run it."""
    done = subprocess.run(
        [sys.executable, "-m", "deploy.cluster", *arguments],
        cwd=ROOT,
        env={**os.environ, "GARANTE_CLUSTER_DIR": str(cluster.directory)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    # The command rewrote the state file: the test's cluster follows it.
    cluster.processes = load(cluster.state_file).processes
    return done


def a_case_through_nginx(cluster) -> None:
    key = f"op-{uuid.uuid4().hex[:8]}"
    response = tool(
        cluster.url,
        "open_case",
        case_body(key),
        token=cluster.token,
        conversation=identified_conversation(cluster),
        key=key,
    )
    assert response.status_code == 200, response.text


def test_each_part_restarted_by_its_command_serves_again(cluster):
    for name in ("node2", "worker1", "beat", "pgbouncer", "nginx"):
        before = cluster.process(name).pid
        done = cluster_command(cluster, "restart", name)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"restarted: {name} (pid ")
        assert cluster.process(name).pid != before
        assert all(cluster.process(part).alive() for part in cluster.part_names), cluster.logs()
        a_case_through_nginx(cluster)
    for url in cluster.node_urls:
        with httpx.Client(base_url=url, timeout=10) as http:
            assert http.get("/readyz").status_code == 200


def test_manage_py_runs_against_the_clusters_database(cluster):
    done = cluster_command(
        cluster,
        "manage",
        "shell",
        "-v",
        "0",
        "-c",
        "from core.models import Company; print(Company.objects.get(slug='sandbox').name)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Garante Sandbox"


def unix_sockets_of(pid: int) -> set[str]:
    """The paths of the Unix sockets process `pid` holds open (/proc: its descriptors' inodes
    looked up in the kernel's table of Unix sockets)."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) > 7 and fields[6] in inodes:
            paths.add(fields[7])
    return paths


def test_no_node_holds_a_gunicorn_control_socket(cluster):
    # gunicorn's default control socket is one path per user (~/.gunicorn/gunicorn.ctl): two
    # nodes would contend for it. The cluster's nodes open none.
    for n in (1, 2):
        master = cluster.process(f"node{n}").pid
        assert [path for path in unix_sockets_of(master) if path.endswith(".ctl")] == []


def test_beats_decision_to_skip_an_entry_is_in_its_log_at_the_default_level(cluster):
    """Another beat's claim on the per-minute entry (core.periodic), made here: the cluster's
    beat skips the entry when it is next due, and says so in its log."""
    entry = "agenda.appointment_messages_sweep"
    key = f"garante:beat-claim:{cluster.database_name}:{entry}"
    client = redis.Redis.from_url(cluster.redis_url)
    log = Path(cluster.process("beat").log)
    logged_before = log.stat().st_size
    client.set(key, "another beat", px=90_000)
    try:
        wait_for(
            lambda: f"beat: {entry} skipped" in log.read_text(errors="replace")[logged_before:],
            timeout=75,
            interval=1,
        )
    finally:
        client.delete(key)
        client.close()


def test_a_second_start_keeps_the_gateway_token(cluster):
    token = cluster.token
    cluster.stop()
    cluster.start_sending()
    assert cluster.token == token
    a_case_through_nginx(cluster)
    active = cluster.sql(
        "SELECT count(*) FROM core_gatewaycredential WHERE revoked_at IS NULL"
        " AND name = 'sandbox gateway'"
    )
    assert active == [(1,)]
